// The processes a handler starts end with its attempt or its worker: attached children, detached ones (their own
// session) and a grandchild whose parent exited, after an attempt that timed out but heard its signal (the
// worker is kept), when an idle worker is reaped, and when the pool closes (shutdown).
import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { poolRig, type PoolRig } from './fixtures.ts';

const SPAWNING_HANDLER = `
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { defineTask } from 'df-worker';

const loop = (pidFile: string) =>
  "require('node:fs').appendFileSync(" + JSON.stringify(pidFile) + ", process.pid + '\\\\n'); setInterval(() => {}, 1000);";

/** Resolves once the three processes wrote their pid: they run, and can do harm, from then on. */
async function allStarted(pidFile: string): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline) {
    const text = existsSync(pidFile) ? readFileSync(pidFile, 'utf8') : '';
    if (text.split('\\n').filter(Boolean).length >= 3) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

export default defineTask({
  key: 'misbehaving',
  outputKeys: ['result'],
  handle: async (input: Record<string, unknown>, ctx) => {
    const pidFile = String(input.pidFile);
    spawn(process.execPath, ['-e', loop(pidFile)], { stdio: 'ignore' });
    spawn(process.execPath, ['-e', loop(pidFile)], { stdio: 'ignore', detached: true }).unref();
    // A double fork: the middle process exits at once, its detached child is left to init.
    const outer = "require('node:child_process').spawn(process.execPath, ['-e', " + JSON.stringify(loop(pidFile)) +
      "], { stdio: 'ignore', detached: true }).unref();";
    spawn(process.execPath, ['-e', outer], { stdio: 'ignore' });
    if (input.mode === 'return') {
      await allStarted(pidFile);
      return { result: 1 };
    }
    // Heard the signal: stops once its processes all run (a loaded machine takes a while to start them).
    return await new Promise((_resolve, reject) => {
      ctx.signal.addEventListener('abort', () => void allStarted(pidFile).then(() => reject(ctx.signal.reason)));
    });
  },
});
`;

let rig: PoolRig | undefined;
/** Every pid a test read: whatever the pool did, none is left running after the test. */
const seen: number[] = [];
afterEach(async () => {
  await rig?.close();
  rig = undefined;
  for (const pid of seen.splice(0).filter(alive)) process.kill(pid, 'SIGKILL');
});

function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !['Z', 'X'].includes(stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3));
  } catch {
    return false;
  }
}

async function childPids(file: string, count: number): Promise<number[]> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const pids = (await readFile(file, 'utf8').catch(() => '')).split('\n').filter(Boolean).map(Number);
    if (pids.length >= count || Date.now() > deadline) {
      seen.push(...pids);
      return pids;
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe.runIf(process.platform === 'linux').each(['process', 'thread'] as const)(
  'processes a handler started (%s)',
  (isolation) => {
    it('end before a timed-out attempt ends, though its handler stopped and its worker is kept', async () => {
      rig = await poolRig(isolation, { source: SPAWNING_HANDLER, abortSettleMs: 25_000 });
      const pidFile = path.join(rig.dir, 'pids');
      const attempt = rig.run({ mode: 'wait', pidFile }, { timeoutMs: 1_000 });
      const pids = await childPids(pidFile, 3);
      const outcome = await attempt;
      expect(outcome.status).toBe('FAILED');
      expect(pids).toHaveLength(3);
      expect(pids.filter(alive)).toEqual([]);
      // The worker heard its signal: kept for the next attempt.
      expect(rig.gone).toEqual([]);
    });

    it('end when their idle worker is reaped', async () => {
      rig = await poolRig(isolation, { source: SPAWNING_HANDLER, idleTimeoutMs: 300 });
      const pidFile = path.join(rig.dir, 'pids');
      expect((await rig.run({ mode: 'return', pidFile })).status).toBe('COMPLETED');
      const pids = await childPids(pidFile, 3);
      await rig.goneCount(1);
      // Reaping is no attempt's end: nothing waits for it but this test, so it waits for their end (bounded).
      const deadline = Date.now() + 3_000;
      while (pids.some(alive) && Date.now() < deadline)
        await new Promise((resolve) => setTimeout(resolve, 20));
      expect(pids).toHaveLength(3);
      expect(pids.filter(alive)).toEqual([]);
    });

    it('end when the pool closes at shutdown', async () => {
      rig = await poolRig(isolation, { source: SPAWNING_HANDLER });
      const pidFile = path.join(rig.dir, 'pids');
      const attempt = rig.run({ mode: 'wait', pidFile }, { timeoutMs: 60_000 });
      const pids = await childPids(pidFile, 3);
      await rig.pool.close();
      expect((await attempt).status).toBe('FAILED');
      expect(pids.filter(alive)).toEqual([]);
    });
  },
);
