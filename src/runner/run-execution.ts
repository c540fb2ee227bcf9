// Runs one claimed task execution to an outcome the daemon can report: checks the input, calls the handler with a
// per-attempt deadline, retries throws and timeouts with backoff, and checks the output. Never throws for a handler.
import { withFailureMessage } from './failure-output.ts';
import type { Logger } from 'pino';
import type { ServiceClient } from '../api/client.ts';
import type { JobContext, JsonObject, TaskExecution } from '../api/types.ts';
import type { Clock } from '../clock/clock.ts';
import { backoffDelayMs, DEFAULT_BACKOFF, type BackoffOptions } from '../clock/backoff.ts';
import { isNonRetryableError, type TaskModule, type TaskSummary } from '../handlers/define-task.ts';
import { inlineHost, type AttemptHost, type HostResult } from './attempt-host.ts';
import { attemptTmpPath, removeAttemptTmpDir, sweepAttemptTmpDirsOnce } from './attempt-tmp-dir.ts';
import { HandlerCrashError, HandlerTimeoutError, summariseError, truncateMessage } from './errors.ts';
import { findMissingInputKeys, missingInputKeysMessage, splitInput } from './input.ts';
import { checkOutput, type OutputCheck } from './output.ts';
import { redactDeep, type Redact } from '../secrets/redact.ts';
import type { TraceSlot, WorkerHooks } from '../events/hooks.ts';
import type { ExecutionOutcome, WorkerEvents } from '../events/worker-events.ts';

export interface RunExecutionArgs {
  handler: TaskModule & { readonly file?: string };
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
  /** Where attempts run. Default: inline, on this event loop. */
  host?: AttemptHost;
  /** The client behind `ctx.service`. Default: none, and the handler's calls are refused. */
  service?: ServiceClient;
  /** Applied to every message, stack and output value that came from handler code. Default: none. */
  redact?: Redact;
  /**
   * Poison execution guard: `prior` runs of this execution already ended with the daemon dying; once runs
   * that died (those and handler workers that died in this run) reach `limit`, it is not tried again.
   */
  crashes?: { limit: number; prior: number };
  /**
   * Where each handler attempt's start and end is told ('attempt'); the requests of the handler's
   * `ctx.service` are told on the client's own emitter (ServiceClient.forAttempt). Default: none.
   */
  events?: WorkerEvents;
  /** Asked for a span around each attempt (`attemptTrace`). Default: none. */
  hooks?: WorkerHooks;
}

export type { AttemptEvent, ExecutionOutcome, FailureKind } from '../events/worker-events.ts';

export const SHUTDOWN_MESSAGE = 'worker shut down before the handler finished';

type AttemptResult =
  | Exclude<HostResult, { kind: 'stopped' }>
  | { kind: 'timeout'; error: HandlerTimeoutError }
  | { kind: 'aborted' };

export async function runExecution(args: RunExecutionArgs): Promise<ExecutionOutcome> {
  const { task, execution, clock, shutdownSignal } = args;
  const startedAt = clock.monotonic();
  const finish = (
    status: ExecutionOutcome['status'],
    output: JsonObject,
    attempts: number,
    failure?: ExecutionOutcome['failure'],
  ): ExecutionOutcome => ({
    status,
    output: status === 'FAILED' ? withFailureMessage(output) : output,
    attempts,
    durationMs: clock.monotonic() - startedAt,
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
  const redact = args.redact ?? ((text: string) => text);
  let crashes = 0;
  for (let attempt = 1; ; attempt++) {
    if (shutdownSignal?.aborted) return aborted(attempt - 1);
    const logger = args.logger.child({ taskKey: task.key, executionId: execution.id, attempt });
    logger.debug('attempt started');
    const startedAt = args.clock.monotonic();
    const ref = { task: task.key, executionId: execution.id };
    const trace: TraceSlot = args.hooks?.attemptTrace?.({ ...ref, attempt }) ?? {};
    args.events?.emit('attempt', { ...ref, attempt, phase: 'start' });
    const result = await (trace.run ?? runNow)(() => runAttempt(args, input, job, attempt, logger, trace));
    if (args.events) {
      const failed =
        result.kind === 'threw' || result.kind === 'timeout'
          ? summariseError(result.error)
          : result.kind === 'crashed'
            ? { errorName: 'HandlerCrashError', message: result.message }
            : undefined;
      args.events.emit('attempt', {
        ...ref,
        attempt,
        phase: 'end',
        durationMs: args.clock.monotonic() - startedAt,
        result: result.kind,
        ...(failed
          ? { error: { name: failed.errorName, message: truncateMessage(redact(failed.message)) } }
          : {}),
      });
    }

    if (result.kind === 'returned' || result.kind === 'unusable') {
      const check =
        result.kind === 'returned'
          ? checkOutput(result.value, task.outputKeys)
          : ({ ok: false, ...result } satisfies OutputCheck);
      const { status, output, failure } = settleOutput(check, logger, redact);
      return finish(status, output, attempt, failure);
    }
    // A handler that honours ctx.signal rejects on shutdown; that is the shutdown, not a handler failure.
    if (result.kind === 'aborted' || shutdownSignal?.aborted) return aborted(attempt);

    if (result.kind === 'crashed') {
      crashes++;
      const died = (args.crashes?.prior ?? 0) + crashes;
      if (args.crashes !== undefined && died >= args.crashes.limit) {
        const message = truncateMessage(
          redact(
            `${result.message}; this execution's runs have died ${died} times, so it is not run again ` +
              `(DF_MAX_CRASHES_PER_EXECUTION=${args.crashes.limit})`,
          ),
        );
        logger.error({ crashes: died }, 'poison execution: not running it again');
        return finish(
          'FAILED',
          { error: message, errorName: 'PoisonExecution', attempts: attempt },
          attempt,
          {
            kind: 'crashed',
            message,
          },
        );
      }
    }
    const error = result.kind === 'crashed' ? new HandlerCrashError(result.message) : result.error;
    const summary = summariseError(error);
    const message = truncateMessage(redact(summary.message));
    const errorName = summary.errorName;
    const kind = result.kind === 'timeout' ? 'timeout' : result.kind === 'crashed' ? 'crashed' : 'handler';
    if (isNonRetryableError(error) || attempt >= maxAttempts) {
      warnAttemptFailed(
        logger,
        error,
        message,
        args.redact,
        { errorName, attempts: attempt },
        'attempt failed; not retrying',
      );
      return finish('FAILED', { error: message, errorName, attempts: attempt }, attempt, { kind, message });
    }
    const delayMs = backoffDelayMs(attempt, args.backoff ?? DEFAULT_BACKOFF);
    warnAttemptFailed(
      logger,
      error,
      message,
      args.redact,
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
 * Logs a failed attempt. A NonRetryableError is a failure the handler expected (bad input, a refused
 * request): its message (under `error`) says it all, and a stack trace would only bury it. Otherwise
 * the thrown value goes under `err` when it is a real Error (with `redact`, a copy of
 * its message and stack only, redacted: its other members may hold anything). pino's serializer reads its message, stack, cause and every enumerable member, and throws with
 * them (a throwing getter, a frozen error), so any other value, or an Error that cannot be read, is logged as
 * the summary that will be reported instead.
 */
function warnAttemptFailed(
  logger: Logger,
  error: unknown,
  message: string,
  redact: Redact | undefined,
  fields: Record<string, unknown>,
  msg: string,
): void {
  if (isRealError(error) && !isNonRetryableError(error)) {
    try {
      logger.warn(
        { err: redact === undefined ? error : redactedCopy(error as Error, redact), ...fields },
        msg,
      );
      return;
    } catch {
      // Falls through to the summary.
    }
  }
  logger.warn({ error: message, ...fields }, msg);
}

/** An error of the same class holding only the redacted message and stack. */
function redactedCopy(error: Error, redact: Redact): Error {
  const copy = Object.create(Object.getPrototypeOf(error) as object) as Error;
  const stack = error.stack;
  Object.defineProperty(copy, 'message', { value: redact(String(error.message)), enumerable: false });
  if (typeof stack === 'string')
    Object.defineProperty(copy, 'stack', { value: redact(stack), enumerable: false });
  return copy;
}

function isRealError(value: unknown): boolean {
  try {
    return value instanceof Error;
  } catch {
    return false; // a proxy whose getPrototypeOf trap throws
  }
}

/** Turns a checked handler result into COMPLETED, or into FAILED kind 'output' (a handler bug: never retried). */
function settleOutput(
  checked: OutputCheck,
  logger: Logger,
  redact: Redact,
): Pick<ExecutionOutcome, 'status' | 'output' | 'failure'> {
  if (!checked.ok) {
    const message = redact(checked.message);
    logger.warn({ reason: message }, 'handler returned an unusable output; not retrying (a handler bug)');
    const output: JsonObject = { error: message };
    if (checked.missingOutputKeys !== undefined) output.missingOutputKeys = checked.missingOutputKeys;
    return { status: 'FAILED', output, failure: { kind: 'output', message } };
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
  return { status: 'COMPLETED', output: redactDeep(checked.output, redact) };
}

const runNow = <T>(fn: () => T): T => fn();

/**
 * The handler's `ctx.service`, its requests told one by one as `serviceCall` on the client's emitter only while
 * someone listens (traces): none, no cost.
 */
function observedService(args: RunExecutionArgs, attempt: number): ServiceClient | undefined {
  return args.service?.forAttempt({ task: args.task.key, executionId: args.execution.id, attempt });
}

/** One call of the handler on its host, raced against its deadline and the shutdown signal. */
async function runAttempt(
  args: RunExecutionArgs,
  input: JsonObject,
  job: JobContext,
  attempt: number,
  logger: Logger,
  trace: TraceSlot,
): Promise<AttemptResult> {
  const { handler, task, clock, shutdownSignal } = args;
  const timeoutMs = handler.timeoutMs ?? args.defaultTimeoutMs;
  const timeoutError = new HandlerTimeoutError(task.key, timeoutMs);
  const attemptController = new AbortController();
  const signal =
    shutdownSignal === undefined
      ? attemptController.signal
      : AbortSignal.any([attemptController.signal, shutdownSignal]);

  const tmpDir = attemptTmpPath();
  void sweepAttemptTmpDirsOnce(logger);
  const timer = new AbortController();
  clock.sleep(timeoutMs, timer.signal).then(
    () => attemptController.abort(timeoutError),
    () => undefined, // the attempt ended first and cancelled the timer
  );
  try {
    // Each attempt gets its own deep copy of the input (JSON from the wire), so one that mutated it, nested
    // values included, does not change what the retry sees.
    const result = await (args.host ?? inlineHost).run(
      {
        handler,
        task,
        execution: args.execution,
        input: structuredClone(input),
        job,
        attempt,
        logger,
        timeoutMs,
        tmpDir,
        redact: args.redact ?? ((text: string) => text),
        service: observedService(args, attempt),
        trace,
      },
      signal,
    );
    if (result.kind !== 'stopped') return result;
    return shutdownSignal?.aborted ? { kind: 'aborted' } : { kind: 'timeout', error: timeoutError };
  } finally {
    timer.abort();
    // The host has ended what it can stop of the handler (a worker is terminated first), so nothing is
    // written there after this.
    await removeAttemptTmpDir(tmpDir, logger);
  }
}

/** The service's retryCount comes off the wire; anything but a non-negative integer means no retry. */
function sanitiseRetryCount(retryCount: unknown): number {
  return typeof retryCount === 'number' && Number.isSafeInteger(retryCount) && retryCount >= 0
    ? retryCount
    : 0;
}
