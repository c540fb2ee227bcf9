// ctx.tmpDir in every DF_HANDLER_ISOLATION: the handler module below runs inline (loaded by the daemon's own
// loader, as with `none`) and through a real HandlerPool (worker threads, child processes). Each attempt
// sees its own folder with mode 0700, and the folder is gone once the attempt ended, however it ended.
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import type { JsonObject } from '../../src/api/types.ts';
import { systemClock } from '../../src/clock/clock.ts';
import { loadHandlersOrThrow } from '../../src/handlers/loader.ts';
import { ATTEMPT_TMP_PREFIX } from '../../src/runner/attempt-tmp-dir.ts';
import { runExecution, type ExecutionOutcome } from '../../src/runner/run-execution.ts';
import { runTaskLocally } from '../../src/runner/run-locally.ts';
import { defineTask } from '../../src/handlers/define-task.ts';
import { statSync, writeFileSync } from 'node:fs';
import { poolRig, type PoolRig } from '../sandbox/fixtures.ts';
import { execution, recordingLogger } from './helpers.ts';

/** Writes a file in ctx.tmpDir, notes the folder and its mode in `input.log`, then ends as `input.mode` says. */
const SCRATCH_HANDLER = `
import { appendFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';

export default {
  key: 'misbehaving',
  outputKeys: ['result'],
  async handle(input, ctx) {
    const dir = ctx.tmpDir;
    writeFileSync(path.join(dir, 'scratch.txt'), 'attempt ' + ctx.attempt);
    const mode = statSync(dir).mode & 0o777;
    appendFileSync(String(input.log), JSON.stringify({ dir, mode, attempt: ctx.attempt, stable: ctx.tmpDir === dir }) + '\\n');
    if (input.mode === 'throw-first' && ctx.attempt === 1) throw new Error('the first attempt fails');
    if (input.mode === 'honour-signal')
      return await new Promise((_resolve, reject) => ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason)));
    if (input.mode === 'ignore-signal') return await new Promise(() => {});
    return { result: dir };
  },
};
`;

interface Seen {
  dir: string;
  mode: number;
  attempt: number;
  stable: boolean;
}

interface Rig {
  dir: string;
  run(
    input: JsonObject,
    options?: { timeoutMs?: number; retryCount?: number; shutdownSignal?: AbortSignal },
  ): Promise<ExecutionOutcome>;
  close(): Promise<void>;
}

async function inlineRig(): Promise<Rig> {
  const dir = await mkdtemp(path.join(tmpdir(), 'df-tmpdir-inline-'));
  await writeFile(path.join(dir, 'misbehaving.mjs'), SCRATCH_HANDLER);
  const handler = (await loadHandlersOrThrow(dir)).get('misbehaving')!;
  const log = recordingLogger();
  return {
    dir,
    run: (input, run = {}) =>
      runExecution({
        handler: run.timeoutMs === undefined ? handler : { ...handler, timeoutMs: run.timeoutMs },
        task: {
          key: 'misbehaving',
          retryCount: run.retryCount ?? 0,
          inputKeys: [],
          outputKeys: handler.outputKeys,
        },
        execution: execution(input),
        clock: systemClock,
        logger: log.logger,
        defaultTimeoutMs: 5_000,
        backoff: { baseMs: 0, maxMs: 0 },
        ...(run.shutdownSignal ? { shutdownSignal: run.shutdownSignal } : {}),
      }),
    close: () => rm(dir, { recursive: true, force: true }),
  };
}

async function sandboxRig(isolation: 'thread' | 'process'): Promise<Rig> {
  const rig: PoolRig = await poolRig(isolation, { source: SCRATCH_HANDLER, abortSettleMs: 300 });
  return { dir: rig.dir, run: (input, run) => rig.run(input, run), close: () => rig.close() };
}

async function seen(log: string): Promise<Seen[]> {
  const text = existsSync(log) ? await readFile(log, 'utf8') : '';
  return text
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as Seen);
}

/** Resolves once the handler has noted `count` attempts (a real worker takes real time to start). */
async function attemptsNoted(log: string, count: number): Promise<void> {
  for (const deadline = Date.now() + 20_000; Date.now() < deadline; await sleep(10)) {
    if ((await seen(log)).length >= count) return;
  }
  throw new Error(`the handler did not note ${count} attempts`);
}

function expectPrivateAndGone(attempts: Seen[]): void {
  for (const a of attempts) {
    expect(a.mode).toBe(0o700);
    expect(a.stable).toBe(true);
    expect(path.dirname(a.dir)).toBe(tmpdir());
    expect(path.basename(a.dir).startsWith(ATTEMPT_TMP_PREFIX)).toBe(true);
    expect(existsSync(a.dir)).toBe(false);
  }
}

let rig: Rig | undefined;
afterEach(async () => {
  await rig?.close();
  rig = undefined;
});

const makers = { none: inlineRig, thread: () => sandboxRig('thread'), process: () => sandboxRig('process') };

describe.each(['none', 'thread', 'process'] as const)('ctx.tmpDir (DF_HANDLER_ISOLATION=%s)', (isolation) => {
  it('is a private folder of its own for each attempt, removed after a return and after a throw', async () => {
    rig = await makers[isolation]();
    const log = path.join(rig.dir, 'seen.jsonl');
    const first = await rig.run({ mode: 'throw-first', log }, { retryCount: 1 });
    const second = await rig.run({ mode: 'ok', log });
    expect(first).toMatchObject({ status: 'COMPLETED', attempts: 2 });
    expect(second.status).toBe('COMPLETED');
    const attempts = await seen(log);
    expect(attempts.map((a) => a.attempt)).toEqual([1, 2, 1]);
    expect(new Set(attempts.map((a) => a.dir)).size).toBe(3);
    expect(second.output).toEqual({ result: attempts[2]!.dir });
    expectPrivateAndGone(attempts);
  });

  it('is removed after an attempt that timed out, whether the handler heard ctx.signal or not', async () => {
    rig = await makers[isolation]();
    const log = path.join(rig.dir, 'seen.jsonl');
    // A worker started first: the deadlines below then run from the handler's start, not the worker's.
    await rig.run({ mode: 'ok', log });
    const heard = await rig.run({ mode: 'honour-signal', log }, { timeoutMs: 500 });
    const ignored = await rig.run({ mode: 'ignore-signal', log }, { timeoutMs: 500 });
    expect(heard.failure?.kind).toBe('timeout');
    expect(ignored.failure?.kind).toBe('timeout');
    const attempts = await seen(log);
    expect(attempts).toHaveLength(3);
    expectPrivateAndGone(attempts);
  });

  it('is removed after an attempt aborted by the worker shutting down', async () => {
    rig = await makers[isolation]();
    const log = path.join(rig.dir, 'seen.jsonl');
    const shutdown = new AbortController();
    const running = rig.run(
      { mode: 'honour-signal', log },
      { shutdownSignal: shutdown.signal, timeoutMs: 30_000 },
    );
    await attemptsNoted(log, 1);
    shutdown.abort();
    const outcome = await running;
    expect(outcome.failure?.kind).toBe('aborted');
    const attempts = await seen(log);
    expect(attempts).toHaveLength(1);
    expectPrivateAndGone(attempts);
  });
});

describe('ctx.tmpDir in runTaskLocally (the test helper handler projects use)', () => {
  it('gives the handler a private folder and removes it before the outcome is returned', async () => {
    let dir = '';
    const task = defineTask({
      key: 'scratch',
      outputKeys: ['mode'],
      handle: (_input, ctx) => {
        dir = ctx.tmpDir;
        writeFileSync(path.join(dir, 'scratch.txt'), 'x');
        return { mode: statSync(dir).mode & 0o777 };
      },
    });
    const outcome = await runTaskLocally(task, {});
    expect(outcome).toMatchObject({ status: 'COMPLETED', output: { mode: 0o700 } });
    expect(path.basename(dir).startsWith(ATTEMPT_TMP_PREFIX)).toBe(true);
    expect(existsSync(dir)).toBe(false);
  });
});
