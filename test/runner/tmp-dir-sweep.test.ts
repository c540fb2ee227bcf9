// Attempt folders (ctx.tmpDir) a killed daemon left behind: a kill -9 mid-attempt cannot remove its own, so the
// next process sweeps, at its first attempt, the folders whose process is gone, and leaves those of live ones.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Emulator } from '../../src/emulator/index.ts';
import { ATTEMPT_TMP_PREFIX, sweepAttemptTmpDirs } from '../../src/runner/attempt-tmp-dir.ts';
import { runCli, type CliProcess } from '../cli/process.ts';
import { waitFor } from '../daemon/harness.ts';
import { recordingLogger } from './helpers.ts';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'df-worker-sweep-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** The pid of a process that ran and ended: no process holds it now (unless the kernel reused it since). */
function endedPid(): number {
  const child = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))']);
  return Number(child.stdout.toString());
}

describe('sweepAttemptTmpDirs', () => {
  it('removes the folders of ended processes and older runs of this pid, and keeps those of live processes', async () => {
    const day = 24 * 3_600_000;
    const now = Date.now();
    const startedAt = now - 60_000;
    const folder = async (name: string, ageMs = 0) => {
      const path = join(dir, `${ATTEMPT_TMP_PREFIX}${name}`);
      await mkdir(path);
      await writeFile(join(path, 'scratch.txt'), 'left behind');
      const at = new Date(now - ageMs);
      await utimes(path, at, at);
      return path;
    };
    const dead = endedPid();
    const ofEnded = await folder(`${dead}-a`);
    const ofLive = await folder(`${process.ppid}-b`);
    const ofThisRun = await folder(`${process.pid}-c`);
    const ofEarlierRunOfThisPid = await folder(`${process.pid}-d`, 120_000);
    const oldUnowned = await folder('0b7a6c1e-old', 2 * day);
    const youngUnowned = await folder('0b7a6c1e-young', 3_600_000);
    const notAFolder = join(dir, `${ATTEMPT_TMP_PREFIX}${dead}-file`);
    await writeFile(notAFolder, 'a file, not ours to remove');
    const other = join(dir, 'someone-elses');
    await mkdir(other);

    const { logger, lines } = recordingLogger();
    const removed = await sweepAttemptTmpDirs({
      logger,
      dir,
      now,
      startedAt,
      alive: (pid) => pid !== dead,
    });

    expect(removed).toBe(3);
    expect(existsSync(ofEnded)).toBe(false);
    expect(existsSync(ofEarlierRunOfThisPid)).toBe(false);
    expect(existsSync(oldUnowned)).toBe(false);
    for (const kept of [ofLive, ofThisRun, youngUnowned, notAFolder, other])
      expect(existsSync(kept)).toBe(true);
    expect(lines.find((l) => l.msg?.toString().startsWith('removed attempt folders'))).toMatchObject({
      removed: 3,
    });
  });

  it('tells a live pid from an ended one by itself (signal 0)', async () => {
    const dead = endedPid();
    await mkdir(join(dir, `${ATTEMPT_TMP_PREFIX}${dead}-a`));
    await mkdir(join(dir, `${ATTEMPT_TMP_PREFIX}${process.ppid}-b`));
    const { logger } = recordingLogger();
    expect(await sweepAttemptTmpDirs({ logger, dir })).toBe(1);
    expect(existsSync(join(dir, `${ATTEMPT_TMP_PREFIX}${process.ppid}-b`))).toBe(true);
  });
});

const HANDLER = `
import { appendFileSync, existsSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';

export default {
  key: 'scratch',
  outputKeys: ['dir'],
  async handle(input, ctx) {
    const dir = ctx.tmpDir;
    writeFileSync(path.join(dir, 'scratch.txt'), 'work in progress');
    appendFileSync(String(input.log), dir + '\\n');
    // The first run of the first execution hangs until the daemon is killed.
    if (existsSync(String(input.hang))) {
      rmSync(String(input.hang));
      await new Promise(() => {});
    }
    return { dir };
  },
};
`;

describe('a daemon killed mid-attempt', () => {
  it('leaves its ctx.tmpDir, and the next daemon removes it at its first attempt', async () => {
    const emulator = new Emulator({ apiKeys: ['sweep-key'] });
    await emulator.listen();
    const handlers = join(dir, 'handlers');
    const temp = join(dir, 'tmp');
    await mkdir(handlers);
    await mkdir(temp);
    await writeFile(join(handlers, 'scratch.ts'), HANDLER);
    emulator.createTask({ key: 'scratch', outputKeys: [{ key: 'dir', description: 'the attempt folder' }] });
    const log = join(dir, 'attempts.log');
    const hang = join(dir, 'hang');
    await writeFile(log, '');
    await writeFile(hang, '');
    const env = {
      DF_API_URL: emulator.url,
      DF_API_KEY: 'sweep-key',
      DF_HANDLERS_DIR: handlers,
      DF_STATE_DIR: join(dir, 'state'),
      DF_HTTP_PORT: '0',
      DF_RETRY_BASE_MS: '50',
      TMPDIR: temp,
    };
    const attempts = () => readFileSync(log, 'utf8').split('\n').filter(Boolean);
    let daemon: CliProcess | undefined;
    try {
      const first = emulator.enqueueExecution('scratch', { log, hang });
      daemon = runCli(['start'], env);
      await waitFor(() => attempts().length === 1, 'the first attempt to hang', 30_000);
      const [left] = attempts();
      daemon.child.kill('SIGKILL');
      await daemon.exited;
      expect(existsSync(left!)).toBe(true);

      // The next daemon replays the journaled claim (its folder is a new one) and sweeps the one left behind.
      daemon = runCli(['start'], env);
      await waitFor(
        () => (emulator.execution(first.id)?.reports.length ?? 0) > 0,
        'the replayed execution reported',
        30_000,
      );
      await waitFor(() => !existsSync(left!), 'the folder left by the killed daemon removed', 10_000);
      expect(emulator.execution(first.id)!.reports[0]).toMatchObject({ status: 'COMPLETED' });
      expect(
        daemon.logs().some((l) => l.msg === 'removed attempt folders (ctx.tmpDir) that ended processes left'),
      ).toBe(true);
    } finally {
      daemon?.child.kill('SIGKILL');
      await daemon?.exited;
      await emulator.close();
    }
  }, 60_000);
});
