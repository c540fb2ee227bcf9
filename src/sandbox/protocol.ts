// The messages between the daemon and a handler worker (a thread or a child process). Everything that crosses
// is plain data: the handler's values are checked and made JSON-safe on the worker's side of the boundary.
import type { JobContext, JsonObject, TaskExecution } from '../api/types.ts';
import type { ErrorRecord } from '../api/error-record.ts';
import type { TaskSummary } from '../handlers/define-task.ts';
import type { ServiceCall } from '../handlers/task-service.ts';

/** A thrown value, reduced on the worker's side to what the runner needs to judge and report it. */
export interface SerializedError {
  /** `summariseError`'s name. */
  name: string;
  /** `summariseError`'s message (cause included, bounded). */
  message: string;
  stack?: string;
  /** The handler threw a NonRetryableError: the runner does not retry it. */
  nonRetryable: boolean;
}

/** Runs one attempt of `taskKey`'s handler from `file`. */
export interface RunMessage {
  type: 'run';
  attemptId: number;
  file: string;
  taskKey: string;
  input: JsonObject;
  execution: TaskExecution;
  task: TaskSummary;
  attempt: number;
  job: JobContext;
  /** Where `ctx.tmpDir` is made on first read; the daemon removes it once the attempt ended. */
  tmpDir: string;
  /** pino level of the daemon's logger: lines below it are not sent across. */
  logLevel: string;
  /** Largest output, as JSON in bytes, sent back (DF_HANDLER_MAX_OUTPUT_BYTES): a larger one fails the attempt. */
  maxOutputBytes?: number;
  /** W3C trace-context headers of the attempt's span when the daemon traces: the worker then traces too. */
  trace?: Record<string, string>;
}

/** Aborts `ctx.signal` of a running attempt (its deadline passed, or the daemon stops). */
export interface AbortMessage {
  type: 'abort';
  attemptId: number;
  reason: 'timeout' | 'shutdown';
  timeoutMs: number;
}

/** The answer to a `ctx.service` call (`ServiceCallMessage`): its value, or its error as a record. */
export type ServiceResultMessage = { type: 'service-result'; callId: number } & (
  { ok: true; value: unknown } | { ok: false; error: ErrorRecord }
);

export type ToWorker = RunMessage | AbortMessage | ServiceResultMessage;

/** How an attempt ended, as the worker saw it. */
export type WorkerOutcome =
  /** The handler returned a usable output: already JSON-safe. */
  | { kind: 'returned'; output: JsonObject }
  /** The handler returned something that cannot be reported (see checkOutput). */
  | { kind: 'unusable'; message: string; missingOutputKeys?: string[] }
  | { kind: 'threw'; error: SerializedError };

export type FromWorker =
  /** The worker listens: a child process drops what arrives before (a thread's port keeps it). */
  | { type: 'ready' }
  | { type: 'result'; attemptId: number; outcome: WorkerOutcome }
  /** A `ctx.service` call of the running attempt, for the daemon to perform with its client. */
  | ({ type: 'service-call'; attemptId: number; callId: number } & ServiceCall)
  /** One pino line a handler logged through `ctx.logger`, as JSON text. */
  | { type: 'log'; line: string }
  /**
   * An error no attempt is running to take: thrown or rejected after its attempt ended, or outside any
   * attempt. `executionId` is the attempt's it came from, or else the last one the worker ran.
   */
  | {
      type: 'stray';
      origin: 'uncaught exception' | 'unhandled rejection';
      executionId?: string;
      afterAttempt: boolean;
      error: SerializedError;
    }
  /** Handler code called process.exit: the worker is going away. */
  | { type: 'exit-called'; code: number; executionId?: string }
  /** Spans the handler made that ended, for the daemon to export (see tracing/forwarded-span.ts). */
  | { type: 'spans'; spans: unknown[] }
  /** A call the handler made on `ctx.span` (a SpanUpdate), for the attempt's span in the daemon. */
  | { type: 'span-update'; attemptId: number; update: unknown };

/** The pino binding that routes a handler's log line to its attempt's logger on the daemon's side. */
export const ATTEMPT_BINDING = 'dfAttempt';
