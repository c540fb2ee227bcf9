// The standalone daemon: the core (core.ts) with the state folder (lock, journal, budget.json) and this process's
// own scheduler, which claims beside the replay of what a previous run left in the journal.
import { withFailureMessage } from '../runner/failure-output.ts';
import type { Budget } from '../budget/budget.ts';
import type { DeadLetter, Journal } from '../journal/journal.ts';
import { Scheduler } from '../scheduler/scheduler.ts';
import type { WorkerOptions } from './contract.ts';
import {
  DaemonCore,
  type Claimer,
  type CoreHandle,
  type CoreParts,
  type DaemonMode,
  type ModeState,
} from './core.ts';
import { JournalReplay } from './journal-replay.ts';
import { backoffFromConfig, reportReserveFor } from './service-wiring.ts';
import { memoryState, openStateFolder, type StandaloneState } from './state-folder.ts';

export { StartupError } from './task-list.ts';
export type { DaemonWorker, Readiness, WorkerOptions } from './contract.ts';

/**
 * Exit code of a daemon that stopped because its state folder's lock vanished or changed owner (sysexits
 * EX_TEMPFAIL): another daemon may use the folder and the key; a supervisor restarting it meets that lock.
 */
export const EXIT_STATE_LOCK_LOST = 75;

/** How often what the planner learnt of arrivals is saved, so a crash loses that much of it at most. */
const PROFILE_SAVE_MS = 3_600_000;

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
  #scheduler: Scheduler | undefined;
  #replay: JournalReplay | undefined;
  /** Why this daemon no longer holds the state folder, once it found out. */
  #lockLost: string | undefined;
  readonly #ownStop = Promise.withResolvers<number>();

  constructor(options: StandaloneOptions = {}) {
    this.#options = options;
  }

  /** Resolves with the process's exit code when the worker stopped on its own (its state lock lost). */
  get ownStop(): Promise<number> {
    return this.#ownStop.promise;
  }

  /** The state folder's journal, once open (undefined with the state in memory). */
  get journal(): Journal | undefined {
    return this.#state?.journal;
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
    const scheduler = new Scheduler({
      client: parts.client,
      planner: parts.planner,
      clock,
      logger,
      concurrency: config.concurrency,
      taskConcurrency: (task) => parts.registry.byId(task.taskId)?.handler.concurrency,
      // A refused key is retried at the slowest back-off: an operator has to act anyway.
      unauthorizedRetryMs: config.scheduler.errorBackoffMaxMs,
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
      events,
      // A poll still unanswered when the reports' flush window ends is cut, its answer lost.
      cutPolls: core.reportSignal,
      // The journal's records are owed their reports too, until the replay has handed them all over.
      onReportsOwed: (owed) => {
        parts.budget.reportReserve = reportReserveFor(owed + (this.#replay?.waiting ?? 0));
      },
    });
    this.#scheduler = scheduler;
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
    if (this.#options.memory?.keepProfile !== false) loops.push(this.#profileSaveLoop());
    if (journal) loops.push(this.#journalRecheckLoop());
    return Promise.resolve({
      loops,
      wake: (taskKey) => scheduler.wake(taskKey),
      keyChanged: () => scheduler.keyChanged(),
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
    setImmediate(() => void core.stop().then(() => this.#ownStop.resolve(EXIT_STATE_LOCK_LOST)));
  }

  /** Saves what the planner learnt of arrivals every hour, so a crash loses an hour of it at most. */
  async #profileSaveLoop(): Promise<void> {
    const { clock, pollSignal: signal } = this.#core!;
    while (!signal.aborted) {
      try {
        await clock.sleep(PROFILE_SAVE_MS, signal);
      } catch {
        return;
      }
      await this.#writeProfile();
    }
  }

  async #writeProfile(): Promise<void> {
    try {
      await this.#parts?.planner.save();
    } catch (error) {
      this.#core!.logger.warn({ err: error as Error }, 'could not save the arrival profile');
    }
  }

  /** A journal that could not be written is tried again now and then; polling resumes once it can. */
  async #journalRecheckLoop(): Promise<void> {
    const { clock, config, logger, events, pollSignal: signal } = this.#core!;
    const journal = this.#state!.journal!;
    while (!signal.aborted) {
      try {
        await clock.sleep(config.journal.recheckMs, signal);
        if (!journal.writable && (await journal.recheck())) {
          logger.info('the journal is writable again');
          this.#scheduler?.wake();
        }
        events.emit('journal', journal.counts);
      } catch {
        if (signal.aborted) return;
      }
    }
  }
}

/** What sending a dead letter's report again gave: accepted (the letter is removed), or why not. */
export type DeadLetterRetry = { delivered: true } | { delivered: false; message: string };

export class Worker extends DaemonCore<Budget> {
  readonly #mode: StandaloneMode;

  constructor(options: WorkerOptions, standalone: StandaloneOptions = {}) {
    const mode = new StandaloneMode(standalone);
    super(options, mode);
    this.#mode = mode;
  }

  /** Resolves with the process's exit code when the worker stopped on its own (its state lock lost). */
  get stoppedOnItsOwn(): Promise<number> {
    return this.#mode.ownStop;
  }

  /** The journal's dead letters, oldest first; none while the state is in memory or before start(). */
  deadLetters(): Promise<DeadLetter[]> {
    return this.#mode.journal?.deadLetters() ?? Promise.resolve([]);
  }

  /**
   * Sends a dead letter's report again, through the key's budget as every report: once the service accepts it,
   * the letter is removed. A refusal leaves it in place and says why.
   */
  async retryDeadLetter(executionId: string): Promise<DeadLetterRetry> {
    const journal = this.#mode.journal;
    const client = this.client;
    if (!journal || !client) return { delivered: false, message: 'the worker has no journal open' };
    const letter = (await journal.deadLetters()).find((l) => l.entry.executionId === executionId);
    const outcome = letter?.entry.outcome;
    if (!letter || !outcome) return { delivered: false, message: `no dead letter of ${executionId} is kept` };
    try {
      const output = outcome.status === 'FAILED' ? withFailureMessage(outcome.output) : outcome.output;
      await client.reportExecution(executionId, { status: outcome.status, output });
    } catch (error) {
      this.logger.warn({ executionId, err: error as Error }, 'a dead letter sent again was refused');
      return { delivered: false, message: error instanceof Error ? error.message : String(error) };
    }
    await journal.discardDeadLetter(executionId);
    this.logger.info({ executionId }, 'a dead letter sent again was accepted; it is removed');
    this.events.emit('journal', journal.counts);
    return { delivered: true };
  }

  /** Removes a dead letter without reporting it; false when none of this execution is kept. */
  async discardDeadLetter(executionId: string): Promise<boolean> {
    const journal = this.#mode.journal;
    if (!journal) return false;
    const removed = await journal.discardDeadLetter(executionId);
    if (removed) {
      this.logger.info({ executionId }, 'dead letter discarded');
      this.events.emit('journal', journal.counts);
    }
    return removed;
  }
}
