// Runs one claimed task execution to an outcome the daemon can report: checks the input, calls the handler with a
// per-attempt deadline, retries throws and timeouts with backoff, and checks the output. Never throws for a handler.
import type { Logger } from 'pino';
import type { JobContext, JsonObject, TaskExecution } from '../api/types.ts';
import type { Clock } from '../clock/clock.ts';
import {
  isNonRetryableError,
  type TaskContext,
  type TaskModule,
  type TaskSummary,
} from '../handlers/define-task.ts';
import { backoffDelayMs, DEFAULT_BACKOFF, type BackoffOptions } from '../clock/backoff.ts';
import { runInAttemptScope } from './attempt-scope.ts';
import { HandlerTimeoutError, summariseError } from './errors.ts';
import { findMissingInputKeys, missingInputKeysMessage, splitInput } from './input.ts';
import { checkOutput } from './output.ts';

export interface RunExecutionArgs {
  handler: TaskModule;
  /** The service's task: its inputKeys, outputKeys and retryCount win over the handler's declarations. */
  task: TaskSummary;
  execution: TaskExecution;
  clock: Clock;
  logger: Logger;
  /** Aborting it stops the attempt in progress and any further retry; the outcome is FAILED, kind 'aborted'. */
  shutdownSignal?: AbortSignal;
  /** Per-attempt time limit in milliseconds for handlers that declare no `timeoutMs`. */
  defaultTimeoutMs: number;
  /** Delay between attempts. Default { baseMs: 1000, maxMs: 30000 }. */
  backoff?: BackoffOptions;
}

export type FailureKind = 'input' | 'output' | 'handler' | 'timeout' | 'aborted';

export interface ExecutionOutcome {
  status: 'COMPLETED' | 'FAILED';
  /** What to report: the handler's result when COMPLETED, an `{ error, ... }` map when FAILED. */
  output: JsonObject;
  /** Handler calls made (0 when the input was rejected or the worker shut down first). */
  attempts: number;
  /** Clock time from the start of the run to the outcome, backoff included. */
  durationMs: number;
  failure?: { kind: FailureKind; message: string };
}

export const SHUTDOWN_MESSAGE = 'worker shut down before the handler finished';

type AttemptResult =
  | { kind: 'returned'; value: unknown }
  | { kind: 'threw'; error: unknown }
  | { kind: 'timeout'; error: HandlerTimeoutError }
  | { kind: 'aborted' };

export async function runExecution(args: RunExecutionArgs): Promise<ExecutionOutcome> {
  const { task, execution, clock, shutdownSignal } = args;
  const startedAt = clock.now();
  const finish = (
    status: ExecutionOutcome['status'],
    output: JsonObject,
    attempts: number,
    failure?: ExecutionOutcome['failure'],
  ): ExecutionOutcome => ({
    status,
    output,
    attempts,
    durationMs: clock.now() - startedAt,
    ...(failure === undefined ? {} : { failure }),
  });
  const aborted = (attempts: number) =>
    finish('FAILED', { error: SHUTDOWN_MESSAGE, attempts }, attempts, {
      kind: 'aborted',
      message: SHUTDOWN_MESSAGE,
    });
  const executionLogger = args.logger.child({ taskKey: task.key, executionId: execution.id });

  const { input, job } = splitInput(execution.input);
  const missingInputKeys = findMissingInputKeys(input, task.inputKeys);
  if (missingInputKeys.length > 0) {
    const message = missingInputKeysMessage(missingInputKeys);
    executionLogger.warn({ missingInputKeys }, 'execution input lacks declared keys; handler not called');
    return finish('FAILED', { error: message, missingInputKeys }, 0, { kind: 'input', message });
  }

  const maxAttempts = sanitiseRetryCount(task.retryCount) + 1;
  for (let attempt = 1; ; attempt++) {
    if (shutdownSignal?.aborted) return aborted(attempt - 1);
    const logger = args.logger.child({ taskKey: task.key, executionId: execution.id, attempt });
    logger.debug('attempt started');
    const result = await runAttempt(args, input, job, attempt, logger);

    if (result.kind === 'returned') {
      const { status, output, failure } = settleOutput(result.value, task, logger);
      return finish(status, output, attempt, failure);
    }
    // A handler that honours ctx.signal rejects on shutdown; that is the shutdown, not a handler failure.
    if (result.kind === 'aborted' || shutdownSignal?.aborted) return aborted(attempt);

    const { message, errorName } = summariseError(result.error);
    const kind = result.kind === 'timeout' ? 'timeout' : 'handler';
    if (isNonRetryableError(result.error) || attempt >= maxAttempts) {
      warnAttemptFailed(
        logger,
        result.error,
        message,
        { errorName, attempts: attempt },
        'attempt failed; not retrying',
      );
      return finish('FAILED', { error: message, errorName, attempts: attempt }, attempt, { kind, message });
    }
    const delayMs = backoffDelayMs(attempt, args.backoff ?? DEFAULT_BACKOFF);
    warnAttemptFailed(
      logger,
      result.error,
      message,
      { errorName, retryInMs: delayMs },
      'attempt failed; retrying',
    );
    try {
      await clock.sleep(delayMs, shutdownSignal);
    } catch {
      return aborted(attempt);
    }
  }
}

/**
 * Logs a failed attempt with the thrown value under `err` when it is a real Error. pino's serializer reads its
 * message, stack, cause and every enumerable member, and throws with them (a throwing getter, a frozen error), so
 * any other value, or an Error it cannot serialise, is logged as the summary that will be reported instead.
 */
function warnAttemptFailed(
  logger: Logger,
  error: unknown,
  message: string,
  fields: Record<string, unknown>,
  msg: string,
): void {
  if (isRealError(error)) {
    try {
      logger.warn({ err: error, ...fields }, msg);
      return;
    } catch {
      // Falls through to the summary.
    }
  }
  logger.warn({ error: message, ...fields }, msg);
}

function isRealError(value: unknown): boolean {
  try {
    return value instanceof Error;
  } catch {
    return false; // a proxy whose getPrototypeOf trap throws
  }
}

/** Turns what the handler returned into COMPLETED, or into FAILED kind 'output' (a handler bug: never retried). */
function settleOutput(
  value: unknown,
  task: TaskSummary,
  logger: Logger,
): Pick<ExecutionOutcome, 'status' | 'output' | 'failure'> {
  const checked = checkOutput(value, task.outputKeys);
  if (!checked.ok) {
    logger.warn(
      { reason: checked.message },
      'handler returned an unusable output; not retrying (a handler bug)',
    );
    const output: JsonObject = { error: checked.message };
    if (checked.missingOutputKeys !== undefined) output.missingOutputKeys = checked.missingOutputKeys;
    return { status: 'FAILED', output, failure: { kind: 'output', message: checked.message } };
  }
  // Undeclared keys are reported anyway (the service stores whatever output it gets); one warning per execution
  // nudges the author to declare them so job designers can see and map them.
  if (checked.undeclaredKeys.length > 0) {
    logger.warn(
      { undeclaredOutputKeys: checked.undeclaredKeys },
      'handler output has keys not declared in the task outputKeys; reporting them anyway',
    );
  }
  logger.debug('attempt completed');
  return { status: 'COMPLETED', output: checked.output };
}

/** One call of the handler, raced against its deadline and the shutdown signal. */
async function runAttempt(
  args: RunExecutionArgs,
  input: JsonObject,
  job: JobContext,
  attempt: number,
  logger: Logger,
): Promise<AttemptResult> {
  const { handler, task, clock, shutdownSignal } = args;
  const timeoutMs = handler.timeoutMs ?? args.defaultTimeoutMs;
  const timeoutError = new HandlerTimeoutError(task.key, timeoutMs);
  const attemptController = new AbortController();
  const signal =
    shutdownSignal === undefined
      ? attemptController.signal
      : AbortSignal.any([attemptController.signal, shutdownSignal]);

  const timer = new AbortController();
  clock.sleep(timeoutMs, timer.signal).then(
    () => attemptController.abort(timeoutError),
    () => undefined, // the attempt ended first and cancelled the timer
  );

  let onAbort: (() => void) | undefined;
  // Resolves when the deadline passes or the worker shuts down, so a handler that ignores ctx.signal still loses.
  const stopped = new Promise<AttemptResult>((resolve) => {
    onAbort = () =>
      resolve(shutdownSignal?.aborted ? { kind: 'aborted' } : { kind: 'timeout', error: timeoutError });
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
  });

  const ctx: TaskContext = { execution: args.execution, task, attempt, job, logger, signal };
  // Wrapping the call turns a synchronous throw into a rejection like any other; each attempt gets its own deep copy
  // of the input (JSON from the wire) so one that mutated it, nested values included, does not change what the
  // retry sees.
  // A rejection the handler leaked (never awaited) fails this attempt too: see attempt-scope.ts.
  let failLeaked!: (result: AttemptResult) => void;
  const leaked = new Promise<AttemptResult>((resolve) => (failLeaked = resolve));
  const running = runInAttemptScope(
    (error) => failLeaked({ kind: 'threw', error }),
    () => new Promise<unknown>((resolve) => resolve(handler.handle(structuredClone(input), ctx))),
  ).then(
    (value): AttemptResult => ({ kind: 'returned', value }),
    (error: unknown): AttemptResult => ({ kind: 'threw', error }),
  );
  try {
    return await Promise.race([running, stopped, leaked]);
  } finally {
    timer.abort();
    if (onAbort !== undefined) signal.removeEventListener('abort', onAbort);
  }
}

/** The service's retryCount comes off the wire; anything but a non-negative integer means no retry. */
function sanitiseRetryCount(retryCount: unknown): number {
  return typeof retryCount === 'number' && Number.isSafeInteger(retryCount) && retryCount >= 0
    ? retryCount
    : 0;
}
