// The small types the event map shares with the parts that emit it (the scheduler's poll results, the runner's
// attempts and outcomes): kept here, below every part and every listener, so both import them downward.
import type { JsonObject } from '../schema/json.ts';

export type PollResult = 'hit' | 'empty' | 'error';

/**
 * Why a poll's answer could not be used, so that the execution it may have claimed is nobody's: cut short by a
 * time limit or the connection, still unanswered when the shutdown ended, or a 2xx that is not JSON or names no
 * execution. (A readable answer with an id is not lost: its execution is reported FAILED.)
 */
export const POLL_ANSWER_LOSSES = ['timeout', 'connection', 'shutdown', 'not-json', 'no-id'] as const;
export type PollAnswerLoss = (typeof POLL_ANSWER_LOSSES)[number];

/** One handler attempt starting, or ending with how it ended (`error`: the failure's redacted message). */
export type AttemptEvent =
  | { readonly attempt: number; readonly phase: 'start' }
  | {
      readonly attempt: number;
      readonly phase: 'end';
      readonly durationMs: number;
      readonly result: 'returned' | 'unusable' | 'threw' | 'timeout' | 'aborted' | 'crashed';
      readonly error?: { readonly name: string; readonly message: string };
    };

export type FailureKind = 'input' | 'output' | 'handler' | 'timeout' | 'aborted' | 'crashed';

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

/** How a report ended: accepted, refused for good (a dead letter), or kept for a later run. */
export type ReportResult = 'delivered' | 'dead-lettered' | 'left-in-journal';

/** How an execution came through the cluster's queue to the replica that runs it. */
export interface ClaimOrigin {
  /** The trace context the coordinator put in the job (see WorkerHooks.jobHeaders). */
  readonly traceContext?: Readonly<Record<string, string>>;
  /** When the job was added to the queue (epoch ms). */
  readonly queuedAt?: number;
  /** The replica that claimed it (the coordinator), and the one that runs it. */
  readonly claimedBy?: string;
  readonly runBy?: string;
}
