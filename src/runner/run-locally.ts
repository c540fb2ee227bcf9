// Runs a handler outside the daemon, on an input given by hand: the way a handler's own tests (and a future
// `df-worker run` command) exercise it through the very runner the daemon uses.
import { randomUUID } from 'node:crypto';
import { pino, type Logger } from 'pino';
import type { ServiceClient } from '../api/client.ts';
import type { JsonObject, TaskExecution } from '../api/types.ts';
import { systemClock, type Clock } from '../clock/clock.ts';
import type { TaskModule } from '../handlers/define-task.ts';
import type { BackoffOptions } from '../clock/backoff.ts';
import { runExecution, type ExecutionOutcome } from './run-execution.ts';

/** Time limit per attempt when neither the handler nor the options give one. */
export const LOCAL_DEFAULT_TIMEOUT_MS = 60_000;

export interface RunTaskLocallyOptions {
  /** Default: the system clock. Pass a ManualClock to drive timeouts and backoff in tests. */
  clock?: Clock;
  /** Default: a silent logger. */
  logger?: Logger;
  /** Aborting it acts like a worker shutdown. */
  shutdownSignal?: AbortSignal;
  /** Per-attempt time limit in milliseconds when the handler declares no `timeoutMs`. Default 60000. */
  defaultTimeoutMs?: number;
  /** Overrides the handler's declared retryCount, as a task configured differently on the service would. */
  retryCount?: number;
  /** Delay between attempts. Default { baseMs: 1000, maxMs: 30000 }; tests pass { baseMs: 0, maxMs: 0 }. */
  backoff?: BackoffOptions;
  /**
   * The client behind `ctx.service`, e.g. `new ServiceClient({ baseUrl: emulator.url, apiKey: 'emulator-key' })`
   * on an `Emulator` in a handler's tests. Default: none, and the handler's calls are refused.
   */
  service?: ServiceClient;
}

/**
 * Runs `handler` once on `input` (which may carry a `context` like the service's) and returns the outcome the
 * daemon would report. The task is the handler's own declarations.
 */
export async function runTaskLocally(
  handler: TaskModule,
  input: JsonObject,
  options: RunTaskLocallyOptions = {},
): Promise<ExecutionOutcome> {
  const clock = options.clock ?? systemClock;
  const execution: TaskExecution = {
    object: 'task_execution',
    id: `local-${randomUUID()}`,
    taskId: 'local',
    status: 'IN_PROGRESS',
    input,
    createdAt: new Date(clock.now()).toISOString(),
  };
  return runExecution({
    handler,
    task: {
      key: handler.key,
      retryCount: options.retryCount ?? handler.retryCount,
      inputKeys: handler.inputKeys,
      outputKeys: handler.outputKeys,
    },
    execution,
    clock,
    logger: options.logger ?? pino({ level: 'silent' }),
    defaultTimeoutMs: options.defaultTimeoutMs ?? LOCAL_DEFAULT_TIMEOUT_MS,
    ...(options.shutdownSignal === undefined ? {} : { shutdownSignal: options.shutdownSignal }),
    ...(options.backoff === undefined ? {} : { backoff: options.backoff }),
    ...(options.service === undefined ? {} : { service: options.service }),
  });
}
