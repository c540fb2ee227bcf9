// Handler modules that misbehave the way real handler code does, written to a temp folder, and a runner
// set-up that runs them through a real HandlerPool (threads or processes).
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { JsonObject } from '../../src/api/types.ts';
import { systemClock } from '../../src/clock/clock.ts';
import { WorkerEvents } from '../../src/events/worker-events.ts';
import { defineTask, type TaskModule } from '../../src/handlers/define-task.ts';
import { redactor } from '../../src/secrets/redact.ts';
import { runExecution, type ExecutionOutcome } from '../../src/runner/run-execution.ts';
import { HandlerPool, type WorkerGoneReason } from '../../src/sandbox/handler-pool.ts';
import type { Isolation } from '../../src/sandbox/worker-channel.ts';
import { execution, recordingLogger, type RecordingLogger } from '../runner/helpers.ts';

export const SECRET = 'sk-live-0123456789abcdef';

/** One handler module per behaviour; `input.mode` picks what the handler does. */
export const MISBEHAVING_HANDLER = `
import { appendFileSync, existsSync } from 'node:fs';
import { defineTask, NonRetryableError } from 'df-worker';

export default defineTask({
  key: 'misbehaving',
  outputKeys: ['result'],
  handle: async (input: Record<string, unknown>, ctx) => {
    const mode = String(input.mode);
    ctx.logger.info({ mode, attempt: ctx.attempt }, 'handler started');
    switch (mode) {
      case 'ok':
        return { result: Number(input.n) * 2 };
      case 'env':
        return { result: Object.keys(process.env).filter((name) => name.startsWith('DF_') || name === 'SANDBOX_PLAIN').sort().join(',') };
      case 'spin':
        for (;;) {}
      case 'honour-signal':
        return await new Promise((resolve, reject) => {
          const timer = setTimeout(() => resolve({ result: 'late' }), 60_000);
          ctx.signal.addEventListener('abort', () => { clearTimeout(timer); reject(ctx.signal.reason); });
        });
      case 'ignore-signal':
        // Ignores ctx.signal: its side effect lands after delayMs whatever happens.
        return await new Promise((resolve) => setTimeout(() => {
          appendFileSync(String(input.file), 'side effect\\n');
          resolve({ result: 'done' });
        }, Number(input.delayMs)));
      case 'wait-for-file':
        // Runs until the file input.file names exists, or delayMs passed: the test says when it ends.
        return await new Promise((resolve) => {
          const deadline = Date.now() + Number(input.delayMs);
          const timer = setInterval(() => {
            if (!existsSync(String(input.file)) && Date.now() < deadline) return;
            clearInterval(timer);
            resolve({ result: 'done' });
          }, 10);
        });
      case 'exit':
        process.exit(3);
      case 'oom': {
        const hoard: unknown[] = [];
        for (;;) hoard.push(new Array(100_000).fill(Math.random()));
      }
      case 'callback-throw':
        return await new Promise(() => setTimeout(() => { throw new Error('thrown from a timer'); }, 10));
      case 'late-throw':
        setTimeout(() => { throw new Error('thrown after returning'); }, 50);
        Promise.reject(new Error('rejected after returning'));
        return { result: 'returned first' };
      case 'leak-key':
        ctx.logger.warn({ token: String(input.key) }, 'logging the key ' + String(input.key));
        if (input.where === 'output') return { result: 'key=' + String(input.key) };
        throw new Error('token ' + String(input.key));
      case 'non-retryable':
        throw new NonRetryableError('bad input, do not retry');
      default:
        throw new Error('unknown mode ' + mode);
    }
  },
});
`;

export interface PoolRig {
  pool: HandlerPool;
  handler: TaskModule & { file: string };
  log: RecordingLogger;
  gone: WorkerGoneReason[];
  /** Resolves once `count` workers in all have gone away. */
  goneCount(count: number): Promise<void>;
  started: () => number;
  dir: string;
  run(input: JsonObject, options?: RunOptions): Promise<ExecutionOutcome>;
  close(): Promise<void>;
}

export interface RunOptions {
  timeoutMs?: number;
  retryCount?: number;
  shutdownSignal?: AbortSignal;
  crashes?: { limit: number; prior: number };
  id?: string;
}

export async function poolRig(
  isolation: Isolation,
  options: {
    memoryMb?: number;
    maxOutputBytes?: number;
    env?: Record<string, string>;
    idleTimeoutMs?: number;
    spawnAfterMs?: number;
    startBackstopMs?: number;
    /** Default the pool's own (1 s): a loaded machine can take a few hundred ms to deliver an abort. */
    abortSettleMs?: number;
    /** The handler module's source: MISBEHAVING_HANDLER unless given. */
    source?: string;
  } = {},
): Promise<PoolRig> {
  const dir = await mkdtemp(path.join(tmpdir(), 'df-sandbox-'));
  const file = path.join(dir, 'misbehaving.ts');
  await writeFile(file, options.source ?? MISBEHAVING_HANDLER);
  const log = recordingLogger();
  const gone: WorkerGoneReason[] = [];
  const goneWaiters: Array<() => void> = [];
  let started = 0;
  const redact = redactor([SECRET]);
  const events = new WorkerEvents();
  const pool = new HandlerPool({
    isolation,
    memoryMb: options.memoryMb ?? 64,
    env: options.env ?? { PATH: process.env.PATH ?? '' },
    logger: log.logger,
    redact,
    maxIdle: 2,
    ...(options.abortSettleMs === undefined ? {} : { abortSettleMs: options.abortSettleMs }),
    ...(options.maxOutputBytes === undefined ? {} : { maxOutputBytes: options.maxOutputBytes }),
    ...(options.idleTimeoutMs === undefined ? {} : { idleTimeoutMs: options.idleTimeoutMs }),
    ...(options.spawnAfterMs === undefined ? {} : { spawnAfterMs: options.spawnAfterMs }),
    ...(options.startBackstopMs === undefined ? {} : { startBackstopMs: options.startBackstopMs }),
    events,
  });
  events.on('handlerWorker', (event) => {
    if (event.started) {
      started++;
      return;
    }
    gone.push(event.reason as WorkerGoneReason);
    for (const wake of goneWaiters.splice(0)) wake();
  });
  const goneCount = async (count: number) => {
    while (gone.length < count) await new Promise<void>((resolve) => goneWaiters.push(resolve));
  };
  const declared = defineTask({ key: 'misbehaving', outputKeys: ['result'], handle: () => ({ result: 0 }) });
  const handler = { ...declared, file };
  return {
    pool,
    handler,
    log,
    gone,
    goneCount,
    started: () => started,
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
        execution: execution(input, run.id),
        clock: systemClock,
        logger: log.logger,
        defaultTimeoutMs: 5_000,
        backoff: { baseMs: 0, maxMs: 0 },
        host: pool,
        redact,
        ...(run.shutdownSignal ? { shutdownSignal: run.shutdownSignal } : {}),
        ...(run.crashes ? { crashes: run.crashes } : {}),
      }),
    async close() {
      await pool.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** The longest gap between ticks of a 10 ms interval while `work` runs: how long this event loop was held. */
export async function longestLoopStall<T>(work: Promise<T>): Promise<{ value: T; stallMs: number }> {
  let last = performance.now();
  let stallMs = 0;
  const ticker = setInterval(() => {
    const now = performance.now();
    stallMs = Math.max(stallMs, now - last);
    last = now;
  }, 10);
  try {
    return { value: await work, stallMs };
  } finally {
    clearInterval(ticker);
  }
}
