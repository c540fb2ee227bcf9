// Runs the handler of one claimed execution to an outcome the pipeline can report (see runExecution): only
// the execution's own task's handler, and whatever goes wrong on the way, a df-worker bug included, is a
// FAILED outcome, never a rejection.
import type { Logger } from 'pino';
import type { JsonObject, TaskExecution } from '../api/types.ts';
import type { ServiceClient } from '../api/client.ts';
import type { Clock } from '../clock/clock.ts';
import type { WorkerHooks } from '../events/hooks.ts';
import type { FailureKind, WorkerEvents } from '../events/worker-events.ts';
import type { AttemptHost } from '../runner/attempt-host.ts';
import type { Redact } from '../secrets/redact.ts';
import { runExecution, type ExecutionOutcome } from '../runner/run-execution.ts';
import type { RegisteredTask } from './task-registry.ts';

/** What running a handler needs of the pipeline's options. */
export interface HandlerRunOptions {
  clock: Clock;
  logger: Logger;
  defaultTimeoutMs: number;
  /** Back-off between handler attempts. */
  backoff?: { baseMs: number; maxMs: number };
  /** Where handler attempts run (DF_HANDLER_ISOLATION). Default: inline. */
  host?: AttemptHost;
  /** The client behind handlers' `ctx.service`: the daemon's key and budget, in its 'handler' class. */
  service?: ServiceClient;
  /** Cleans the daemon's secrets out of what handlers return, throw and log. */
  redact?: Redact;
  /** Runs of one execution that may die with the daemon or its worker before it is failed as poison. */
  maxCrashesPerExecution?: number;
  /** Aborted when the shutdown grace period ends: running handlers are stopped and reported FAILED. */
  handlerSignal: AbortSignal;
  /**
   * Where each step is told: claim (or resume), attempts, the handlers' `ctx.service` calls, the outcome,
   * report retries, refusals, fences, redeliveries, the report, and the journal's counts after it.
   */
  events: WorkerEvents;
  /** Asked for the context each execution runs in, and a span around each attempt. Default: none. */
  hooks?: WorkerHooks;
}

/** The handler's outcome; whatever goes wrong on the way is a FAILED outcome, never a rejection. */
export async function runToOutcome(
  o: HandlerRunOptions,
  registered: RegisteredTask | undefined,
  execution: TaskExecution,
  logger: Logger,
  priorCrashes = 0,
): Promise<ExecutionOutcome> {
  try {
    return await runHandler(o, registered, execution, logger, priorCrashes);
  } catch (error) {
    // runExecution settles every handler failure itself; reaching here is a df-worker bug, and the
    // execution must still be reported.
    const message = `df-worker failed while running the handler: ${describeInternalError(error)}`;
    logger.error({ err: error as Error }, 'internal error while running an execution; reporting it FAILED');
    return failedOutcome('handler', message);
  }
}

async function runHandler(
  o: HandlerRunOptions,
  registered: RegisteredTask | undefined,
  execution: TaskExecution,
  logger: Logger,
  priorCrashes: number,
): Promise<ExecutionOutcome> {
  if (!registered) {
    logger.error({ taskId: execution.taskId }, 'no handler serves this task; reporting it FAILED');
    return failedOutcome('handler', 'no handler', {
      error: `no handler in this df-worker serves task ${execution.taskId}`,
    });
  }
  const outcome = await runExecution({
    handler: registered.handler,
    task: registered.task,
    execution,
    clock: o.clock,
    // The runner binds taskKey, executionId and attempt itself.
    logger: o.logger,
    shutdownSignal: o.handlerSignal,
    defaultTimeoutMs: o.defaultTimeoutMs,
    ...(o.backoff ? { backoff: o.backoff } : {}),
    ...(o.host ? { host: o.host } : {}),
    ...(o.service ? { service: o.service } : {}),
    ...(o.redact ? { redact: o.redact } : {}),
    ...(o.maxCrashesPerExecution === undefined
      ? {}
      : { crashes: { limit: o.maxCrashesPerExecution, prior: priorCrashes } }),
    events: o.events,
    ...(o.hooks ? { hooks: o.hooks } : {}),
  });
  return outcome;
}

/**
 * An outcome df-worker decides itself, its handler not run (or not to an end): FAILED after no attempt.
 * `message` is the failure's; the report's output is `{ error: message }` unless given.
 */
export function failedOutcome(
  kind: FailureKind,
  message: string,
  output: JsonObject = { error: message },
): ExecutionOutcome {
  return { status: 'FAILED', output, attempts: 0, durationMs: 0, failure: { kind, message } };
}

function describeInternalError(error: unknown): string {
  try {
    return error instanceof Error ? error.message : String(error);
  } catch {
    return 'an unknown error';
  }
}
