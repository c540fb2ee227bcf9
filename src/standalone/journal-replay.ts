// Standalone mode's replay of the journal at start: every record a previous run left is resumed beside polling
// (run again, or reported FAILED with DF_JOURNAL_REPLAY=fail, or only reported when its outcome is kept), and
// suspects of having killed the daemon run one at a time. A damaged record whose file names its execution is
// settled with the service's own copy of the execution (see recover).
import type { Logger } from 'pino';
import type { ServiceClient } from '../api/client.ts';
import { ResponseValidationError, ServiceError } from '../api/errors.ts';
import type { TaskExecution } from '../api/types.ts';
import { backoffDelayMs, type BackoffOptions } from '../clock/backoff.ts';
import type { Clock } from '../clock/clock.ts';
import type { DamagedRecord, Journal, JournalEntry } from '../journal/journal.ts';
import type { ExecutionOutcome } from '../runner/run-execution.ts';
import type { Scheduler } from '../scheduler/scheduler.ts';
import type { WorkerEvents } from '../events/worker-events.ts';
import type { ExecutionPipeline } from '../daemon/execution-pipeline.ts';

export interface JournalReplayOptions {
  pipeline: ExecutionPipeline;
  scheduler: Scheduler;
  logger: Logger;
  events: WorkerEvents;
  mode: 'rerun' | 'fail';
  /** DF_HANDLER_ISOLATION=none: a handler may kill the daemon, so no claim is made while a suspect runs. */
  quarantine: boolean;
  /** For damaged records (recover): the journal holding them, and the daemon's client (same key, same gate). */
  journal?: Pick<Journal, 'keepDamagedCopy' | 'dismissDamaged' | 'recordClaim'>;
  client?: Pick<ServiceClient, 'getExecution'>;
  clock?: Clock;
  /** Back-off between fetches of a damaged record's execution that failed for a reason that may pass. */
  backoff?: BackoffOptions;
  /** Aborted when the daemon stops: a fetch not yet answered leaves its damaged record for the next start. */
  signal?: AbortSignal;
}

export class JournalReplay {
  readonly #o: JournalReplayOptions;
  /** Replayed executions running alone while no claim is made. */
  #quarantined = 0;
  /** Suspects not yet handed to the scheduler (see start). */
  #suspects: JournalEntry[] = [];
  /** Damaged records not yet settled (see recover). */
  #damaged = new Set<string>();

  constructor(options: JournalReplayOptions) {
    this.#o = options;
  }

  /** True while a suspect runs alone and no execution may be claimed. */
  get quarantined(): boolean {
    return this.#quarantined > 0;
  }

  /** Records not yet handed to the scheduler: they are owed a report as much as the ones it holds. */
  get waiting(): number {
    return this.#suspects.length + this.#damaged.size;
  }

  /**
   * Settles each damaged record with the service's copy of its execution, in the slots beside polling: one
   * still IN_PROGRESS is run again with the input the service holds (reported FAILED with
   * DF_JOURNAL_REPLAY=fail), one already COMPLETED or FAILED needs no report, one the service does not know
   * (404) cannot take one. Where the service answers but the execution cannot be read from it, it is reported
   * FAILED naming the damage. A fetch that fails for a reason that may pass (network, 5xx, 429) is retried with
   * back-off, and the record stays on disk until it is settled, so a stop meanwhile leaves it to the next start.
   */
  recover(damaged: readonly DamagedRecord[]): void {
    const { scheduler, logger } = this.#o;
    if (damaged.length === 0) return;
    logger.warn({ count: damaged.length }, 'settling damaged journal records with the service');
    for (const record of damaged) {
      this.#damaged.add(record.executionId);
      scheduler.enqueue(() => this.#settle(record, 1));
    }
  }

  async #settle(record: DamagedRecord, attempt: number): Promise<void> {
    const { client, logger } = this.#o;
    const log = logger.child({ executionId: record.executionId, replay: true });
    try {
      let execution: TaskExecution;
      try {
        if (!client) throw new Error('df-worker has no service client to fetch the execution with');
        execution = await client.getExecution(record.executionId, this.#o.signal);
      } catch (error) {
        await this.#unfetched(record, attempt, error, log);
        return;
      }
      await this.#settleFetched(record, execution, log);
      this.#damaged.delete(record.executionId);
    } catch (error) {
      // Work handed to the scheduler must not reject; the record is still on disk for the next start.
      this.#damaged.delete(record.executionId);
      log.error(
        { err: error as Error },
        'could not settle a damaged journal record; it stays for the next start',
      );
    }
  }

  async #unfetched(record: DamagedRecord, attempt: number, error: unknown, log: Logger): Promise<void> {
    const { journal } = this.#o;
    if (error instanceof ServiceError && error.status === 404) {
      await journal?.dismissDamaged(
        record.executionId,
        'the service has no such execution (404): there is nothing to report',
      );
      this.#damaged.delete(record.executionId);
      return;
    }
    const permanent =
      error instanceof ResponseValidationError || (error instanceof ServiceError && !error.retryable);
    if (permanent) {
      await this.#reportDamaged(
        record,
        undefined,
        `the service's copy could not be fetched: ${(error as Error).message}`,
        log,
      );
      this.#damaged.delete(record.executionId);
      return;
    }
    if (this.#o.signal?.aborted) {
      log.warn('damaged journal record not settled before the stop; it stays for the next start');
      return;
    }
    const delayMs = backoffDelayMs(attempt, this.#o.backoff);
    log.warn(
      { err: error as Error, retryInMs: delayMs },
      'could not fetch the execution of a damaged journal record; the record stays and the fetch is retried',
    );
    const clock = this.#o.clock;
    if (!clock) return;
    clock.sleep(delayMs, this.#o.signal).then(
      () => this.#o.scheduler.enqueue(() => this.#settle(record, attempt + 1)),
      () => log.warn('damaged journal record not settled before the stop; it stays for the next start'),
    );
  }

  async #settleFetched(record: DamagedRecord, execution: TaskExecution, log: Logger): Promise<void> {
    const { journal, pipeline, mode } = this.#o;
    if (execution.status !== 'IN_PROGRESS') {
      log.info(
        { status: execution.status },
        'the service already holds the outcome of a damaged journal record',
      );
      await journal?.dismissDamaged(
        record.executionId,
        `the service already holds its outcome (${execution.status}): no report is needed`,
      );
      return;
    }
    if (mode === 'fail') {
      await this.#reportDamaged(record, execution, 'DF_JOURNAL_REPLAY=fail: it was not run again', log);
      return;
    }
    log.warn({ problem: record.problem }, 'running again an execution whose journal record was damaged');
    await journal?.keepDamagedCopy(record.executionId);
    // Claimed anew from the service's copy: journaled, run with the input the service holds, reported.
    await pipeline.process({ taskId: execution.taskId, key: execution.taskId }, execution);
  }

  /** Reports FAILED, naming the damage, an execution that is not run again; journaled first, like any claim. */
  async #reportDamaged(
    record: DamagedRecord,
    execution: TaskExecution | undefined,
    why: string,
    log: Logger,
  ): Promise<void> {
    const { journal, pipeline, clock } = this.#o;
    const message = `df-worker's journal record of this execution was damaged on disk (${record.problem}); ${why}`;
    const outcome: ExecutionOutcome = {
      status: 'FAILED',
      output: { error: message, errorName: 'JournalRecordDamaged' },
      attempts: 0,
      durationMs: 0,
      failure: { kind: 'aborted', message },
    };
    log.error({ problem: record.problem }, 'reporting FAILED an execution whose journal record was damaged');
    const now = new Date(clock?.now() ?? Date.now()).toISOString();
    try {
      await journal?.keepDamagedCopy(record.executionId);
      await journal?.recordClaim(
        {
          executionId: record.executionId,
          taskId: execution?.taskId ?? '',
          taskKey: execution?.taskId ?? '',
          input: execution?.input ?? {},
          claimedAt: now,
        },
        { status: outcome.status, output: outcome.output, attempts: 0, finishedAt: now },
      );
    } catch (error) {
      log.error({ err: error as Error }, 'could not journal the FAILED outcome; reporting it anyway');
    }
    await pipeline.finish(execution?.taskId ?? 'unknown', record.executionId, outcome, log, {
      journaled: true,
    });
  }

  /** Hands every record to the scheduler, in the slots beside polling (never ahead of all of it). */
  start(pending: JournalEntry[]): void {
    const { scheduler, logger, events, mode, quarantine } = this.#o;
    if (pending.length === 0) return;
    logger.warn({ count: pending.length, mode }, 'replaying the journal beside polling');
    const replay = async (entry: JournalEntry) => {
      events.emit('replay', { phase: entry.phase });
      try {
        await this.#o.pipeline.resume(entry, mode);
      } catch (error) {
        // resume() settles every record itself; one that still fails must not keep the others from
        // their replay. It stays in the journal for the next start.
        logger.error(
          { err: error as Error, executionId: entry.executionId },
          'could not replay a journal record; it stays in the journal',
        );
      }
    };
    // A run still claimed after two or more starts has died with the daemon more than once: a suspect.
    // Suspects rerun one at a time, so that the one that kills the daemon does not take the others' counts
    // up with it, and an innocent execution is not failed as poison for dying beside it. Without isolation
    // every execution that was running is a suspect (its handler may be what killed the daemon), and no
    // claim is made while one runs: a death then would lose the poll answers in flight with it.
    const suspects = pending.filter(
      (e) => e.phase === 'claimed' && mode === 'rerun' && (quarantine || (e.starts ?? 1) >= 2),
    );
    this.#suspects = [...suspects];
    const taskOf = (entry: JournalEntry) => ({ taskId: entry.taskId, key: entry.taskKey });
    for (const entry of pending)
      if (!suspects.includes(entry)) scheduler.enqueue(() => replay(entry), taskOf(entry));
    if (quarantine && suspects.length > 0) this.#quarantined++;
    const next = () => {
      const entry = this.#suspects.shift();
      if (entry) scheduler.enqueue(() => replay(entry).finally(next), taskOf(entry));
      else if (quarantine && this.#quarantined > 0) {
        this.#quarantined--;
        scheduler.wake();
      }
    };
    next();
  }
}
