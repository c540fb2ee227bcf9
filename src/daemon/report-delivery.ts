// The last step of an execution in the pipeline: its outcome reported, retried while the service cannot
// take it, then forgotten (accepted), dead-lettered (refused for good, after a FAILED fallback when only its
// output was refused), dropped (another owner reports it) or left in the journal for the next start.
import type { Logger } from 'pino';
import type { WorkerEvents } from '../events/worker-events.ts';
import { summariseError, truncateMessage } from '../runner/errors.ts';
import { withFailureMessage } from '../runner/failure-output.ts';
import type { ExecutionOutcome } from '../runner/run-execution.ts';
import type { Reporter } from '../reports/reporter.ts';
import type { ExecutionJournal } from './execution-journal.ts';

export interface ReportDeliveryOptions {
  journal: ExecutionJournal;
  reporter: Reporter;
  events: WorkerEvents;
  /** Aborted when the daemon must exit: report retries stop, the outcome stays in the journal. */
  reportSignal: AbortSignal;
  /** Records owed a report, and dead letters, told after each report (standalone's journal). */
  journalCounts?: (() => { pending: number; deadLettered: number }) | undefined;
  /** See ExecutionPipelineOptions.fence. */
  fence?: ((executionId: string) => Promise<boolean>) | undefined;
}

export class ReportDelivery {
  readonly #o: ReportDeliveryOptions;

  constructor(options: ReportDeliveryOptions) {
    this.#o = options;
  }

  /**
   * Reports `outcome` to its end (see the header). Never rejects. `onSettled` is told as soon as the service took
   * the report or refused it for good, before the journal is written: from then on a claim of the execution is a
   * new one (handed out again after its report, or queued again after its claim lapsed), which this report does
   * not answer. `replayed`: the outcome comes from the journal of an earlier process, which may have sent its
   * report already (see Reporter's readFirst).
   */
  async deliver(
    taskKey: string,
    executionId: string,
    outcome: { status: ExecutionOutcome['status']; output: ExecutionOutcome['output'] },
    logger: Logger,
    {
      onSettled,
      replayed = false,
    }: { onSettled?: (how: 'delivered' | 'refused') => void; replayed?: boolean } = {},
  ): Promise<void> {
    // Outcomes built here (no handler, a restart, a poison execution...) and replayed ones carry `message` too.
    if (outcome.status === 'FAILED') outcome = { ...outcome, output: withFailureMessage(outcome.output) };
    const { journal, reporter, events } = this.#o;
    const fence = this.#o.fence;
    const ref = { task: taskKey, executionId };
    const report = (status: ExecutionOutcome['status'], output: ExecutionOutcome['output']) =>
      reporter.report(executionId, { status, output }, this.#o.reportSignal, {
        readFirst: replayed,
        ...(fence ? { mayReport: () => this.#owned(fence, executionId, logger) } : {}),
        // Counted only when an attempt failed: `df-worker journal` shows reports that are stuck, and the
        // happy path costs no extra write.
        onRetry: (attempt, error, next) => {
          const { errorName, message } = summariseError(error);
          events.emit('reportRetry', { ...ref, attempt, ...next, error: { name: errorName, message } });
          return journal.recordReportAttempt(executionId).catch((error: unknown) => {
            logger.warn({ err: error as Error }, 'could not count the report attempt in the journal');
          });
        },
      });
    const result = await report(outcome.status, outcome.output);
    try {
      if ('fenced' in result) {
        this.#fenced(taskKey, executionId);
      } else if (result.delivered) {
        onSettled?.('delivered');
        await journal.complete(executionId);
        this.#reported(ref, outcome.status, 'delivered', result.attempts);
      } else if ('refused' in result) {
        events.emit('reportRefused', { ...ref, ...result.refused });
        let refused = result.refused;
        // Settled as refused unless a FAILED report got through in its place.
        let settled: 'delivered' | 'refused' = 'refused';
        if (outcome.status === 'COMPLETED' && OUTPUT_REFUSED.has(refused.status)) {
          // The service will not take this output (too large, or invalid to it): tell the job FAILED so it
          // does not wait forever. The refused output stays in the dead letter for an operator.
          const message = truncateMessage(
            `the service refused the handler's output (${refused.status}): ${refused.message}`,
          );
          logger.error({ refusedStatus: refused.status }, 'output refused; reporting the execution FAILED');
          const fallback = await report('FAILED', { error: message, message, refusedStatus: refused.status });
          if ('fenced' in fallback) {
            this.#fenced(taskKey, executionId);
            return;
          }
          if ('interrupted' in fallback) {
            this.#reported(ref, 'FAILED', 'left-in-journal', result.attempts);
            return;
          }
          if (fallback.delivered) settled = 'delivered';
          refused = {
            ...refused,
            message: fallback.delivered
              ? `${refused.message}; df-worker reported the execution FAILED instead`
              : `${refused.message}; reporting it FAILED instead was refused too: ${fallback.refused.message}`,
          };
        }
        onSettled?.(settled);
        await journal.deadLetter(executionId, refused);
        this.#reported(ref, outcome.status, 'dead-lettered', result.attempts);
      } else {
        this.#reported(ref, outcome.status, 'left-in-journal', result.attempts);
      }
    } catch (error) {
      logger.error({ err: error as Error }, 'could not update the journal after reporting');
    }
  }

  #reported(
    ref: { task: string; executionId: string },
    status: ExecutionOutcome['status'],
    result: 'delivered' | 'dead-lettered' | 'left-in-journal',
    attempts: number,
  ): void {
    this.#o.events.emit('report', { ...ref, status, result, attempts });
    const counts = this.#o.journalCounts;
    if (counts) this.#o.events.emit('journal', counts());
  }

  /** The fence's answer; a fence that fails cannot prove ownership, so the report is dropped. */
  async #owned(
    fence: (executionId: string) => Promise<boolean>,
    executionId: string,
    logger: Logger,
  ): Promise<boolean> {
    try {
      return await fence(executionId);
    } catch (error) {
      logger.warn({ err: error as Error }, 'could not check that this process still owns the execution');
      return false;
    }
  }

  /** This process no longer owns the execution: its outcome is dropped unreported (the new owner reports it). */
  #fenced(task: string, executionId: string): void {
    this.#o.events.emit('fenced', { request: 'report', task, executionId });
  }
}

/** Answers to a COMPLETED report that refuse its output itself: a FAILED report may still get through. */
const OUTPUT_REFUSED: ReadonlySet<number> = new Set([400, 413, 422]);
