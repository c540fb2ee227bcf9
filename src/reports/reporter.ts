// Delivers an execution's outcome to the service: retried on 429, 5xx and network errors until it is
// accepted (or the daemon must stop); refused for good (400, 404...) goes to the dead-letter folder.
import type { Logger } from 'pino';
import type { ServiceClient } from '../api/client.ts';
import { ReportValidationError, ResponseValidationError, ServiceError } from '../api/errors.ts';
import type { JsonObject, ReportStatus } from '../api/types.ts';
import { backoffDelayMs, type BackoffOptions } from '../clock/backoff.ts';
import type { Clock } from '../clock/clock.ts';
import { classifyFailure, type FailureAction } from './retry-policy.ts';

export interface ReporterOptions {
  /** The client, whose budget gate paces every attempt and pauses them all after a 429. */
  client: ServiceClient;
  clock: Clock;
  logger: Logger;
  /** Back-off between failed report attempts (5xx, network, 401): base and cap, in ms. */
  backoff: BackoffOptions;
  onAttemptFailed?: (executionId: string, error: unknown) => void;
}

export type ReportResult =
  | { delivered: true; attempts: number }
  | { delivered: false; attempts: number; refused: { status: number; code?: string; message: string } }
  | { delivered: false; attempts: number; interrupted: true }
  /** `mayReport` said this process no longer owns the execution: nothing was sent, or sent again. */
  | { delivered: false; attempts: number; fenced: true };

export class Reporter {
  readonly #o: ReporterOptions;

  constructor(options: ReporterOptions) {
    this.#o = options;
  }

  /**
   * Sends the report until the service accepts or refuses it for good. `signal` interrupts the retries
   * (deadline of a shutdown): the outcome stays in the journal and is reported at the next start.
   */
  async report(
    executionId: string,
    report: { status: ReportStatus; output: JsonObject },
    signal?: AbortSignal,
    hooks: {
      /**
       * A failed attempt (1-based) is to be retried; `error` is what it failed with; `retryInMs`: the backoff
       * before the next, or 0 after a 429 (`rateLimited`: the budget's pause holds it).
       */
      onRetry?: (
        attempt: number,
        error: unknown,
        next: { retryInMs: number; rateLimited: boolean },
      ) => Promise<void>;
      /**
       * Asked before each attempt leaves (once the budget let it through): false drops the report unsent, and
       * its retries (another owner reports the execution).
       */
      mayReport?: () => Promise<boolean>;
      /**
       * An earlier process sent this report and may have died after the service took it, before recording
       * that (a replayed outcome): the execution is read first, and a report it already holds is not sent again.
       */
      readFirst?: boolean;
    } = {},
  ): Promise<ReportResult> {
    const { client, clock, logger } = this.#o;
    let attempts = 0;
    let transientFailures = 0;
    if (hooks.readFirst === true && (await this.#alreadyApplied(executionId, report.status, signal))) {
      logger.info({ executionId }, 'report had already been applied by the process before the restart');
      return { delivered: true, attempts };
    }
    for (;;) {
      if (signal?.aborted) return { delivered: false, attempts, interrupted: true };
      attempts++;
      let fenced = false;
      const mayReport = hooks.mayReport;
      try {
        await client.reportExecution(
          executionId,
          report,
          signal,
          mayReport &&
            (async () => {
              fenced = !(await mayReport());
              if (fenced) throw new Error('report fenced: this process no longer owns the execution');
            }),
        );
        return { delivered: true, attempts };
      } catch (error) {
        if (fenced) return { delivered: false, attempts: attempts - 1, fenced: true };
        if (signal?.aborted) return { delivered: false, attempts, interrupted: true };
        if (error instanceof ResponseValidationError) {
          // Only a 2xx answer gets this far: the service took the report; its answer's shape is its problem.
          logger.warn(
            { executionId, err: error },
            'report accepted, but the answer is not the documented shape',
          );
          return { delivered: true, attempts };
        }
        this.#o.onAttemptFailed?.(executionId, error);
        const action = reportFailureAction(error);
        let waitMs: number;
        if (action.kind === 'permanent') {
          const e = error as Error;
          // An earlier attempt (of this run, or of one killed before it removed the record) may have been
          // applied with its answer lost; a second PATCH may then be refused.
          if (await this.#alreadyApplied(executionId, report.status, signal)) {
            logger.info({ executionId }, 'report had already been applied by an earlier attempt');
            return { delivered: true, attempts };
          }
          logger.error(
            { executionId, err: e },
            'service refused the report for good; moving it to dead letters',
          );
          return {
            delivered: false,
            attempts,
            refused: {
              status: e instanceof ServiceError ? e.status : 0,
              ...(e instanceof ServiceError && e.code !== undefined ? { code: e.code } : {}),
              message: e.message,
            },
          };
        } else if (action.kind === 'rate-limited') {
          waitMs = 0; // the budget gate, which heard the 429, holds the retry until its pause ends
        } else {
          transientFailures++;
          waitMs = backoffDelayMs(transientFailures, this.#o.backoff);
        }
        await hooks.onRetry?.(attempts, error, {
          retryInMs: waitMs,
          rateLimited: action.kind === 'rate-limited',
        });
        try {
          if (waitMs > 0) await clock.sleep(waitMs, signal);
        } catch {
          return { delivered: false, attempts, interrupted: true };
        }
      }
    }
  }

  async #alreadyApplied(executionId: string, status: ReportStatus, signal?: AbortSignal): Promise<boolean> {
    // A 429 tells nothing of the execution: read again (the budget gate, which heard it, holds the read
    // until its pause ends), a few times, rather than dead-letter a report the service may hold.
    for (let tries = 1; ; tries++) {
      try {
        const current = await this.#o.client.getExecution(executionId, signal);
        return current.status === status;
      } catch (error) {
        const limited = error instanceof ServiceError && error.status === 429;
        if (!limited || tries >= READ_BACK_TRIES || signal?.aborted) return false;
      }
    }
  }
}

/** Reads of a refused report's execution answered 429 before the refusal is taken as it stands. */
const READ_BACK_TRIES = 3;

/**
 * A report is given up only on the service's own refusal (or a report df-worker itself cannot send). Anything
 * else failed before an answer came (the budget could not record the request, say): the service has not seen
 * the report, so it is retried.
 */
function reportFailureAction(error: unknown): FailureAction {
  if (error instanceof ServiceError || error instanceof ReportValidationError) {
    return classifyFailure(error);
  }
  const action = classifyFailure(error);
  return action.kind === 'permanent' ? { kind: 'transient' } : action;
}
