// Standalone mode's replay of the journal at start: every record a previous run left is resumed beside polling
// (run again, or reported FAILED with DF_JOURNAL_REPLAY=fail, or only reported when its outcome is kept), and
// suspects of having killed the daemon run one at a time.
import type { Logger } from 'pino';
import type { JournalEntry } from '../journal/journal.ts';
import type { Scheduler } from '../scheduler/scheduler.ts';
import type { WorkerMetrics } from '../telemetry/metrics.ts';
import type { ExecutionPipeline } from './execution-pipeline.ts';

export interface JournalReplayOptions {
  pipeline: ExecutionPipeline;
  scheduler: Scheduler;
  logger: Logger;
  metrics: WorkerMetrics;
  mode: 'rerun' | 'fail';
  /** DF_HANDLER_ISOLATION=none: a handler may kill the daemon, so no claim is made while a suspect runs. */
  quarantine: boolean;
}

export class JournalReplay {
  readonly #o: JournalReplayOptions;
  /** Replayed executions running alone while no claim is made. */
  #quarantined = 0;
  /** Suspects not yet handed to the scheduler (see start). */
  #suspects: JournalEntry[] = [];

  constructor(options: JournalReplayOptions) {
    this.#o = options;
  }

  /** True while a suspect runs alone and no execution may be claimed. */
  get quarantined(): boolean {
    return this.#quarantined > 0;
  }

  /** Records not yet handed to the scheduler: they are owed a report as much as the ones it holds. */
  get waiting(): number {
    return this.#suspects.length;
  }

  /** Hands every record to the scheduler, in the slots beside polling (never ahead of all of it). */
  start(pending: JournalEntry[]): void {
    const { scheduler, logger, metrics, mode, quarantine } = this.#o;
    if (pending.length === 0) return;
    logger.warn({ count: pending.length, mode }, 'replaying the journal beside polling');
    const replay = async (entry: JournalEntry) => {
      metrics.replayed.inc({ phase: entry.phase });
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
    for (const entry of pending) if (!suspects.includes(entry)) scheduler.enqueue(() => replay(entry));
    if (quarantine && suspects.length > 0) this.#quarantined++;
    const next = () => {
      const entry = this.#suspects.shift();
      if (entry) scheduler.enqueue(() => replay(entry).finally(next));
      else if (quarantine && this.#quarantined > 0) {
        this.#quarantined--;
        scheduler.wake();
      }
    };
    next();
  }
}
