// Standalone mode's state: the state folder (DF_STATE_DIR) taken with a lock, its journal read, and the key's
// budget restored from budget.json, checked against what the journal and the lock prove was sent; while the
// daemon runs, the arrival profile saved there hourly and a journal that could not be written tried again. The
// month replay keeps the same state in memory instead.
import type { Budget } from '../budget/budget.ts';
import {
  budgetFile,
  checkedBudgetStore,
  fileBudgetStore,
  memoryBudgetStore,
  type CheckedBudgetStore,
} from '../budget/store.ts';
import type { DamagedRecord, JournalEntry } from '../journal/journal.ts';
import { requestsShownByJournal } from '../journal/journal-contents.ts';
import { Journal } from '../journal/journal.ts';
import { StateLock } from '../journal/state-lock.ts';
import type { CoreHandle } from '../daemon/mode.ts';
import type { ExecutionJournal } from '../daemon/execution-journal.ts';
import { reportReserveFor } from '../budget/report-reserve.ts';
import { budgetFromConfig } from '../daemon/service-wiring.ts';

/** How often what the planner learnt of arrivals is saved, so a crash loses that much of it at most. */
const PROFILE_SAVE_MS = 3_600_000;

export interface StandaloneState {
  budget: Budget;
  /** What the pipeline records claims and outcomes in: the folder's journal, or memory. */
  records: ExecutionJournal;
  /** The folder's journal; undefined when the state is kept in memory. */
  journal: Journal | undefined;
  lock: StateLock | undefined;
  budgetStore: CheckedBudgetStore | undefined;
  /** Records a previous run left: owed their report. */
  pending: JournalEntry[];
  damaged: DamagedRecord[];
}

/**
 * Takes the state folder (`onLockLost` when another process takes it later), reads the journal and restores the
 * budget. A budget.json the journal and the lock contradict (missing, or counting fewer) is no first start.
 */
export async function openStateFolder(
  core: CoreHandle,
  onLockLost: (reason: string) => void,
): Promise<StandaloneState> {
  const { config, logger, clock, events } = core;
  const lock = await StateLock.acquire(config.state.dir);
  lock.watch(config.state.lockCheckMs, onLockLost);
  const journal = await Journal.open(config.state.dir, { logger, clock });
  const pending = await journal.pending();
  const damaged = journal.damaged();
  const previous = lock.previousHolder;
  const requestsAt = requestsShownByJournal(pending);
  if (previous) requestsAt.push(Date.parse(previous.startedAt));
  // A journal folder changed by a run shows that run's requests (one at least), its records aside.
  const journalChangedAt = journal.lastChangedBefore;
  if (journalChangedAt !== undefined && requestsAt.length === 0) requestsAt.push(journalChangedAt);
  const budgetStore = checkedBudgetStore(
    fileBudgetStore(config.state.dir),
    budgetFile(config.state.dir),
    { stateFolderUsed: journal.usedBefore, requestsAt },
    {
      timeZone: config.budget.timeZone,
      onHandOverWait: (untilMs) =>
        logger.warn(
          { until: new Date(untilMs).toISOString() },
          'a df-worker that lost this state folder is still reporting the executions it ran; waiting for ' +
            'it to finish (at most until the instant given) before the first request',
        ),
    },
  );
  // Every claimed execution needs at least one report, plus room for a retry: the journal's records first.
  const budget = budgetFromConfig(
    config,
    clock,
    reportReserveFor(pending.length + damaged.length),
    budgetStore,
    events,
  );
  await budgetStore.waitForHandOver();
  const restored = await budget.load();
  let month = budget.snapshot().month;
  if (restored === 'estimated') {
    // The conservative reading: at least what the journal and the lock prove was sent this month.
    const monthStartMs = budget.month().startsAt;
    budget.observeMonthUsed(month.key, requestsAt.filter((at) => at >= monthStartMs).length);
    month = budget.snapshot().month;
    const problem = budgetStore.problem;
    logger.warn(
      { used: month.used, file: budgetFile(config.state.dir), problem },
      `${problem ?? 'the saved month budget usage could not be read'}; assuming an even spend of the month ` +
        'so far (at least what the journal shows), and full per-second and per-minute windows (the first ' +
        'requests wait a minute)',
    );
  } else if (restored === 'clock-behind') {
    logger.warn(
      { month: month.key, used: month.used, now: new Date(clock.now()).toISOString() },
      "the saved budget usage is of a later month than this machine's clock says: the clock is behind; " +
        'requests count into that later month',
    );
  } else {
    logger.info({ month: month.key, used: month.used, limit: month.limit }, 'month budget usage');
  }
  return { budget, records: journal, journal, lock, budgetStore, pending, damaged };
}

/** The same state in memory (the month replay): nothing survives the process, nothing is written. */
export async function memoryState(core: CoreHandle): Promise<StandaloneState> {
  const { config, clock, events } = core;
  const budget = budgetFromConfig(config, clock, reportReserveFor(0), memoryBudgetStore(), events);
  await budget.load();
  const settled = () => Promise.resolve();
  const records: ExecutionJournal = {
    recordClaim: settled,
    recordStart: settled,
    recordOutcome: settled,
    recordReportAttempt: settled,
    complete: settled,
    deadLetter: settled,
  };
  return {
    budget,
    records,
    journal: undefined,
    lock: undefined,
    budgetStore: undefined,
    pending: [],
    damaged: [],
  };
}

/** Saves what the planner learnt of arrivals (`save`) every hour, so a crash loses an hour of it at most. */
export async function profileSaveLoop(core: CoreHandle, save: () => Promise<void>): Promise<void> {
  const { clock, pollSignal: signal } = core;
  while (!signal.aborted) {
    try {
      await clock.sleep(PROFILE_SAVE_MS, signal);
    } catch {
      return;
    }
    await save();
  }
}

/** A journal that could not be written is tried again now and then; `writable` (polling resumes) once it can. */
export async function journalRecheckLoop(
  core: CoreHandle,
  journal: Journal,
  writable: () => void,
): Promise<void> {
  const { clock, config, logger, events, pollSignal: signal } = core;
  while (!signal.aborted) {
    try {
      await clock.sleep(config.journal.recheckMs, signal);
      if (!journal.writable && (await journal.recheck())) {
        logger.info('the journal is writable again');
        writable();
      }
      events.emit('journal', journal.counts);
    } catch {
      if (signal.aborted) return;
    }
  }
}
