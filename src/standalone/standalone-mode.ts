// Standalone mode: the state folder (lock, journal, budget.json) and a poll loop of this process's own, which
// claims beside the replay of what a previous run left in the journal. Composed into the core (daemon/core.ts)
// by standaloneDaemon().
import type { Budget } from '../budget/budget.ts';
import type { DeadLetter, Journal } from '../journal/journal.ts';
import type { WorkerOptions } from '../daemon/contract.ts';
import { DaemonCore } from '../daemon/core.ts';
import type { Claimer, CoreHandle, CoreParts, DaemonMode, ModeState } from '../daemon/mode.ts';
import {
  discardDeadLetter,
  retryDeadLetter,
  type DeadLetterDesk,
  type DeadLetterRetry,
} from './dead-letters.ts';
import { JournalReplay } from './journal-replay.ts';
import { reportReserveFor } from '../budget/report-reserve.ts';
import { backoffFromConfig } from '../daemon/service-wiring.ts';
import { EXIT_STATE_LOCK_LOST } from '../errors/exit-codes.ts';
import {
  journalRecheckLoop,
  memoryState,
  openStateFolder,
  profileSaveLoop,
  type StandaloneState,
} from './state-folder.ts';

export { StartupError } from '../daemon/task-list.ts';
export type { DaemonWorker, Readiness, WorkerOptions } from '../daemon/contract.ts';
export type { DeadLetterRetry } from './dead-letters.ts';

/** The standalone daemon: the core with a StandaloneMode (its dead letters on `mode`). */
export type StandaloneDaemon = DaemonCore<Budget, StandaloneMode>;

/** Builds the standalone daemon (`df-worker start` without DF_REDIS_URL, dev, demo, the month replay). */
export function standaloneDaemon(
  options: WorkerOptions,
  standalone: StandaloneOptions = {},
): StandaloneDaemon {
  return new DaemonCore(options, new StandaloneMode(standalone));
}

export interface StandaloneOptions {
  /** Keep the state in memory rather than in DF_STATE_DIR (the month replay); `keepProfile` still saves
   * what the planner learnt there. */
  memory?: { keepProfile: boolean };
}

/** Standalone mode: the state folder, and a scheduler of this process's own. */
export class StandaloneMode implements DaemonMode<Budget> {
  readonly label = 'standalone';
  readonly #options: StandaloneOptions;
  #core: CoreHandle | undefined;
  #state: StandaloneState | undefined;
  #parts: CoreParts<Budget> | undefined;
  #replay: JournalReplay | undefined;
  /** Why this daemon no longer holds the state folder, once it found out. */
  #lockLost: string | undefined;

  constructor(options: StandaloneOptions = {}) {
    this.#options = options;
  }

  /** The state folder's journal, once open (undefined with the state in memory). */
  get journal(): Journal | undefined {
    return this.#state?.journal;
  }

  /** The journal's dead letters, oldest first; none while the state is in memory or before start(). */
  deadLetters(): Promise<DeadLetter[]> {
    return this.journal?.deadLetters() ?? Promise.resolve([]);
  }

  /** Sends a dead letter's report again through the key's budget; once accepted, the letter is removed. */
  retryDeadLetter(executionId: string): Promise<DeadLetterRetry> {
    return retryDeadLetter(this.#deadLetterDesk(), executionId);
  }

  /** Removes a dead letter without reporting it; false when none of this execution is kept. */
  discardDeadLetter(executionId: string): Promise<boolean> {
    return discardDeadLetter(this.#deadLetterDesk(), executionId);
  }

  async open(core: CoreHandle): Promise<ModeState<Budget>> {
    this.#core = core;
    const memory = this.#options.memory;
    const state = memory ? await memoryState(core) : await openStateFolder(core, (r) => this.#loseLock(r));
    this.#state = state;
    return {
      budget: state.budget,
      gate: state.budget,
      journal: state.records,
      ...(state.journal ? { journalCounts: () => state.journal!.counts } : {}),
      keepProfile: memory ? memory.keepProfile : true,
    };
  }

  claim(core: CoreHandle, parts: CoreParts<Budget>): Promise<Claimer> {
    const { config, logger, clock, events } = core;
    const state = this.#state!;
    const journal = state.journal;
    this.#parts = parts;
    const scheduler = core.pollLoop({
      client: parts.client,
      planner: parts.planner,
      concurrency: config.concurrency,
      taskConcurrency: (task) => parts.registry.byId(task.taskId)?.handler.concurrency,
      claimBlocker: () =>
        this.#lockBlocker() ??
        (journal?.writable === false
          ? `the journal cannot be written (${journal.lastError?.message ?? 'unknown error'})`
          : this.#replay?.quarantined
            ? 'an execution that was running when df-worker died is run again alone first ' +
              '(DF_HANDLER_ISOLATION=none: a handler that kills the daemon would lose the claims in flight)'
            : undefined),
      dispatch: (task, execution) => parts.pipeline.process(task, execution),
      failUnreadable: (task, executionId, problem) =>
        parts.pipeline.failUnreadable(task, executionId, problem),
      // A poll still unanswered when the reports' flush window ends is cut, its answer lost.
      cutPolls: core.reportSignal,
      // The journal's records are owed their reports too, until the replay has handed them all over.
      onReportsOwed: (owed) => {
        parts.budget.reportReserve = reportReserveFor(owed + (this.#replay?.waiting ?? 0));
      },
    });
    // The replay takes slots beside polling, never ahead of all of it: a poison execution left by a crash
    // must not keep other tasks from being polled.
    const replay = new JournalReplay({
      pipeline: parts.pipeline,
      scheduler,
      logger,
      events,
      mode: config.journal.replay,
      quarantine: config.handlers.isolation === 'none',
      ...(journal ? { journal } : {}),
      client: parts.client,
      clock,
      backoff: backoffFromConfig(config),
      signal: core.pollSignal,
    });
    this.#replay = replay;
    replay.start(state.pending);
    replay.recover(state.damaged);
    const loops = [scheduler.run(core.pollSignal)];
    // A profile kept in memory only has nothing to save.
    if (this.#options.memory?.keepProfile !== false)
      loops.push(profileSaveLoop(core, () => this.#writeProfile()));
    if (journal) loops.push(journalRecheckLoop(core, journal, () => scheduler.wake()));
    return Promise.resolve({
      loops,
      wake: (taskKey) => scheduler.wake(taskKey),
      keyChanged: () => scheduler.keyChanged(),
      recheck: () => scheduler.recheck(),
      get authorized() {
        return scheduler.authorized;
      },
      get inFlight() {
        return scheduler.inFlight;
      },
      drained: () => scheduler.drained(),
    });
  }

  checks(): ReturnType<DaemonMode<Budget>['checks']> {
    if (this.#options.memory) return {};
    const journal = this.#state?.journal;
    return {
      journal:
        journal?.writable === false
          ? { ok: false, reason: journal.lastError?.message ?? 'journal not writable' }
          : { ok: journal !== undefined },
    };
  }

  async close(): Promise<void> {
    const { logger } = this.#core!;
    // Every request of this run has been sent: a daemon waiting for this one's hand-over may go on.
    this.#state?.budgetStore?.handOffDone();
    try {
      await this.#state?.budget.flush();
    } catch (error) {
      logger.warn({ err: error as Error }, 'could not save the month budget usage');
    }
    // A lost state folder is another daemon's now: what this one learnt is not written over its own.
    if (this.#lockLost === undefined) await this.#writeProfile();
    await this.#state?.lock?.release();
  }

  stoppedFields(): Record<string, unknown> {
    return { journalPending: this.#state?.journal?.counts.pending ?? 0 };
  }

  #deadLetterDesk(): DeadLetterDesk {
    return { journal: this.journal, client: this.#parts?.client, core: this.#core };
  }

  /** Checked before every poll: a lost lock stops claiming at once (the timer may not have fired yet). */
  #lockBlocker(): string | undefined {
    const lost = this.#lockLost ?? this.#state?.lock?.verify();
    if (lost === undefined) return undefined;
    this.#loseLock(lost);
    return `this daemon no longer holds the state folder (${lost})`;
  }

  /**
   * Another daemon may now use the state folder and the key: stop claiming at once, report what runs (those
   * claims are this daemon's alone on the service), leave the month's usage and the last minute's sends in a
   * budget.json only where the new owner has none yet, and exit with EXIT_STATE_LOCK_LOST.
   */
  #loseLock(reason: string): void {
    if (this.#lockLost !== undefined) return;
    this.#lockLost = reason;
    const core = this.#core!;
    const { config, logger } = core;
    logger.error(
      { reason, stateDir: config.state.dir, exitCode: EXIT_STATE_LOCK_LOST },
      `df-worker lost its state folder ${config.state.dir}: ${reason}; it stops claiming, reports the ` +
        `executions it runs and exits ${EXIT_STATE_LOCK_LOST}. Run one df-worker per DF_STATE_DIR and never ` +
        'delete the state folder of a running one',
    );
    // At most the drain of stop(): the grace period, then the reports' flush window, and a second's margin.
    const graceMs = config.shutdownGraceMs;
    this.#state?.budgetStore?.handOff(Date.now() + graceMs + Math.max(5_000, graceMs / 2) + 1_000);
    // Before the budget was loaded it has nothing to leave (and a count of 0 would understate the month).
    if (core.state === 'running') {
      this.#state?.budget.flush().catch((error: unknown) => {
        logger.warn({ err: error as Error }, 'could not leave the month budget usage for the next owner');
      });
    }
    // Not from within the scheduler's claim check: its loop must first reach the wait that stop() interrupts.
    setImmediate(() => void core.stop(EXIT_STATE_LOCK_LOST));
  }

  async #writeProfile(): Promise<void> {
    try {
      await this.#parts?.saveProfile();
    } catch (error) {
      this.#core!.logger.warn({ err: error as Error }, 'could not save the arrival profile');
    }
  }
}
