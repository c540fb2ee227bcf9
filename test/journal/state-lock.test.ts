import { spawn, type ChildProcessByStdio } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { Readable, Writable } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { JournalUnavailableError } from '../../src/journal/errors.ts';
import { StateFolderLockedError, StateLock, takeoverClaimFile } from '../../src/journal/state-lock.ts';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'df-lock-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const lockFile = () => join(dir, 'df-worker.lock');

describe('release during a heartbeat', () => {
  it('waits for a heartbeat write in flight: nothing of the lock is left in the folder', async () => {
    // A heartbeat every millisecond: releases land at every point of a write (temp file, fsync, rename).
    for (let i = 0; i < 40; i++) {
      const lock = await StateLock.acquire(dir, { heartbeatMs: 1 });
      await new Promise((resolve) => setTimeout(resolve, i % 5));
      await lock.release();
      expect(await readdir(dir)).toEqual([]);
    }
  });
});
const holder = (over: Record<string, unknown>) =>
  JSON.stringify({
    pid: 999_999,
    hostname: 'other-host',
    startedAt: new Date().toISOString(),
    heartbeatAt: new Date().toISOString(),
    ...over,
  });

// A worker process reduced to its start: it loads the lock module, says 'ready', tries to acquire the
// lock when told 'go', says what happened, and releases once its stdin closes. The go line lines the
// contenders up, which process start-up times alone would not.
const CONTENDER = `
import { createInterface } from 'node:readline';
const [moduleUrl, stateDir] = process.argv.slice(1);
const { StateLock } = await import(moduleUrl);
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
process.stdout.write('ready\\n');
await lines.next();
let lock;
try {
  lock = await StateLock.acquire(stateDir);
  process.stdout.write('acquired\\n');
} catch (error) {
  process.stdout.write('refused ' + error.name + '\\n');
}
await lines.next();
await lock?.release();
`;
const STATE_LOCK_URL = new URL('../../src/journal/state-lock.ts', import.meta.url).href;

interface Contender {
  child: ChildProcessByStdio<Writable, Readable, null>;
  nextLine: () => Promise<string>;
  exited: Promise<unknown>;
}

function startContender(stateDir: string): Contender {
  const child = spawn(
    process.execPath,
    ['--input-type=module', '--eval', CONTENDER, STATE_LOCK_URL, stateDir],
    {
      stdio: ['pipe', 'pipe', 'inherit'],
    },
  );
  const exited = new Promise((resolve) => child.on('exit', resolve));
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  // A contender that dies early yields 'undefined', which fails the assertions instead of hanging.
  return { child, exited, nextLine: async () => String((await lines.next()).value) };
}

describe('StateLock', () => {
  it('lets one worker hold the state folder and names the holder to a second one', async () => {
    const first = await StateLock.acquire(dir);
    await writeFile(lockFile(), holder({ pid: 4242, hostname: 'worker-a' }));
    await expect(StateLock.acquire(dir)).rejects.toThrow(/pid 4242 on worker-a.*uses the state folder/);
    await first.release();
  });

  it('refuses while another live process on this host holds it, and removes its own lock on release', async () => {
    await writeFile(lockFile(), holder({ pid: process.ppid, hostname: hostname() }));
    await expect(StateLock.acquire(dir)).rejects.toBeInstanceOf(StateFolderLockedError);
    await rm(lockFile());
    const lock = await StateLock.acquire(dir);
    expect(JSON.parse(await readFile(lockFile(), 'utf8'))).toMatchObject({
      pid: process.pid,
      hostname: hostname(),
    });
    await lock.release();
    await expect(stat(lockFile())).rejects.toThrow(/ENOENT/);
  });

  it('takes over a lock whose owner is dead on this host, or whose heartbeat is stale elsewhere', async () => {
    await writeFile(lockFile(), holder({ pid: 999_999, hostname: hostname() }));
    await (await StateLock.acquire(dir)).release();
    const old = new Date(Date.now() - 60_000).toISOString();
    await writeFile(lockFile(), holder({ heartbeatAt: old }));
    await (await StateLock.acquire(dir)).release();
    await writeFile(lockFile(), '{"pid": 12');
    await (await StateLock.acquire(dir)).release();
  });

  it('lets exactly one of several workers starting together take over a stale lock', async () => {
    const contenders = 4;
    const stale = [
      holder({ hostname: 'gone-pod', heartbeatAt: new Date(Date.now() - 120_000).toISOString() }),
      holder({ pid: 999_999, hostname: hostname() }),
    ];
    for (let round = 0; round < 4; round++) {
      await writeFile(lockFile(), stale[round % stale.length]!);
      const workers = Array.from({ length: contenders }, () => startContender(dir));
      try {
        expect(await Promise.all(workers.map((w) => w.nextLine()))).toEqual(Array(contenders).fill('ready'));
        for (const worker of workers) worker.child.stdin.write('go\n');
        const outcomes = await Promise.all(workers.map((w) => w.nextLine()));
        expect(outcomes.filter((o) => o === 'acquired')).toHaveLength(1);
        expect(outcomes.filter((o) => o === 'refused StateFolderLockedError')).toHaveLength(contenders - 1);
        const winner = workers[outcomes.indexOf('acquired')]!;
        expect(JSON.parse(await readFile(lockFile(), 'utf8'))).toMatchObject({ pid: winner.child.pid });
      } finally {
        for (const worker of workers) worker.child.stdin.end();
        await Promise.all(workers.map((w) => w.exited));
      }
      // The winner's release removed the lock; no takeover claim or temp file is left behind.
      expect(await readdir(dir)).toEqual([]);
    }
  });

  it('passes over a takeover claim left by a worker that died while taking over', async () => {
    const stale = holder({ pid: 999_999, hostname: hostname() });
    await writeFile(lockFile(), stale);
    await writeFile(takeoverClaimFile(lockFile(), stale), holder({ pid: 999_998, hostname: hostname() }));
    const lock = await StateLock.acquire(dir);
    expect(JSON.parse(await readFile(lockFile(), 'utf8'))).toMatchObject({ pid: process.pid });
    expect(await readdir(dir)).toEqual(['df-worker.lock']);
    await lock.release();
  });

  it('refuses, naming it, while another live worker is taking over the same stale lock', async () => {
    const stale = holder({ pid: 999_999, hostname: hostname() });
    await writeFile(lockFile(), stale);
    await writeFile(
      takeoverClaimFile(lockFile(), stale),
      holder({ pid: process.ppid, hostname: hostname() }),
    );
    const error = await StateLock.acquire(dir).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StateFolderLockedError);
    expect((error as StateFolderLockedError).holder.pid).toBe(process.ppid);
    expect(await readFile(lockFile(), 'utf8')).toBe(stale);
  });

  it('refreshes its heartbeat so that a live owner never looks stale', async () => {
    const lock = await StateLock.acquire(dir, { heartbeatMs: 20 });
    const before = JSON.parse(await readFile(lockFile(), 'utf8')) as { heartbeatAt: string };
    await expect
      .poll(
        async () => (JSON.parse(await readFile(lockFile(), 'utf8')) as { heartbeatAt: string }).heartbeatAt,
      )
      .not.toBe(before.heartbeatAt);
    await lock.release();
  });

  it('says why when the state folder cannot be created', async () => {
    await writeFile(join(dir, 'file'), 'x');
    await expect(StateLock.acquire(join(dir, 'file', 'state'))).rejects.toBeInstanceOf(
      JournalUnavailableError,
    );
  });
});

describe('StateLock ownership checks', () => {
  it('stays its own across heartbeats, and a stat that matches its last write needs no read', async () => {
    const lock = await StateLock.acquire(dir, { heartbeatMs: 10 });
    expect(lock.verify()).toBeUndefined();
    const first = await readFile(lockFile(), 'utf8');
    await expect.poll(() => readFile(lockFile(), 'utf8')).not.toBe(first);
    expect(lock.verify()).toBeUndefined();
    await lock.release();
  });

  it('finds a vanished lock at once, and its heartbeat does not bring the file back', async () => {
    const lock = await StateLock.acquire(dir, { heartbeatMs: 10 });
    // The heartbeat may write its next copy while the folder is removed (ENOTEMPTY on a loaded machine): rm
    // tries again, as an operator's `rm -rf` would be run again.
    await rm(dir, { recursive: true, force: true, maxRetries: 5, retryDelay: 5 });
    expect(lock.verify()).toMatch(/lock file .*df-worker\.lock vanished/);
    await mkdir(dir, { recursive: true });
    // Several heartbeat periods later the folder is still empty: the lost lock is never written again.
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(await readdir(dir)).toEqual([]);
    await lock.release();
  });

  it('finds a lock that names another owner, and leaves that owner its file on release', async () => {
    const lock = await StateLock.acquire(dir);
    const other = holder({ pid: 4242, hostname: 'worker-b' });
    await writeFile(lockFile(), other);
    expect(lock.verify()).toMatch(/now names another owner \(pid 4242 on worker-b/);
    await lock.release();
    expect(await readFile(lockFile(), 'utf8')).toBe(other);
  });

  it('watch() calls back once with the reason when the lock goes', async () => {
    const lock = await StateLock.acquire(dir);
    const reasons: string[] = [];
    lock.watch(10, (reason) => reasons.push(reason));
    await rm(lockFile());
    await expect.poll(() => reasons.length).toBe(1);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(reasons).toHaveLength(1);
    expect(reasons[0]).toMatch(/vanished/);
    await lock.release();
  });

  it('names the holder of a stale lock it took over (a run that died), and none for a free folder', async () => {
    const free = await StateLock.acquire(dir);
    expect(free.previousHolder).toBeUndefined();
    await free.release();
    const startedAt = '2026-11-27T10:00:00.000Z';
    await writeFile(lockFile(), holder({ pid: 999_999, hostname: hostname(), startedAt }));
    const lock = await StateLock.acquire(dir);
    expect(lock.previousHolder).toMatchObject({ pid: 999_999, startedAt });
    await lock.release();
  });
});
