import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { JournalUnavailableError } from '../../src/journal/errors.ts';
import { StateFolderLockedError, StateLock } from '../../src/journal/state-lock.ts';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'df-lock-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const lockFile = () => join(dir, 'df-worker.lock');
const holder = (over: Record<string, unknown>) =>
  JSON.stringify({
    pid: 999_999,
    hostname: 'other-host',
    startedAt: new Date().toISOString(),
    heartbeatAt: new Date().toISOString(),
    ...over,
  });

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
