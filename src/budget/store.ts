// Where the budget survives restarts: a small JSON file in the state folder, written durably, holding the
// month's usage and the send instants of the last minute (so a restart cannot overrun the service's windows).
import { mkdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { readJsonFile, writeFileDurably } from '../journal/durable-file.ts';
import { errorCode } from '../journal/durable-file.ts';
import { calendarMonthWindow, parseMonthKey } from './month.ts';
import { isWriterStamp, type WriterStamp } from '../clock/writer-stamp.ts';
import type { ErrorCode } from '../errors/catalogue.ts';

export interface BudgetState {
  /** `YYYY-MM` in the budget's time zone. */
  monthKey: string;
  /** Requests of that month, written ahead of use: never less than were sent. */
  used: number;
  /**
   * Send instants (ms since the epoch, oldest first) of the requests of the last minute plus the safety margin.
   * Written before the requests are let through, each is the latest instant its request may leave at, never
   * an earlier one. Absent from files written by versions that did not keep the windows.
   */
  sentAt?: number[];
  /**
   * Which process on which boot wrote `sentAt`, and when on its monotonic and wall clocks: a restart on the same
   * boot places the sends by their monotonic age, whatever the wall clock did meanwhile. Absent from files of
   * releases before it (and from budgets on a clock other than the system's): the wall clock is trusted then.
   */
  writer?: WriterStamp;
  /**
   * Set by a daemon that lost the state folder's lock while it still reports what it ran: it may send until
   * this instant (ms), so the next owner waits for it and then reads the file again (see checkedBudgetStore).
   */
  handedOverUntil?: number;
}

export interface BudgetStore {
  /** Undefined when nothing was saved yet; throws when a saved state cannot be read. */
  load(): Promise<BudgetState | undefined>;
  save(state: BudgetState): Promise<void>;
}

export function memoryBudgetStore(initial?: BudgetState): BudgetStore {
  let state = initial && copy(initial);
  return {
    load: () => Promise.resolve(state && copy(state)),
    save: (next) => {
      state = copy(next);
      return Promise.resolve();
    },
  };
}

/** A copy that shares no array with the caller, as a file would not. */
function copy(state: BudgetState): BudgetState {
  return state.sentAt === undefined ? { ...state } : { ...state, sentAt: [...state.sentAt] };
}

export function fileBudgetStore(stateDir: string): BudgetStore {
  const file = budgetFile(stateDir);
  return {
    async load() {
      const raw = await readJsonFile(file);
      if (raw === undefined) return undefined;
      const state = asBudgetState(raw);
      if (!state) throw new BudgetStateError(file);
      return state;
    },
    save: (state) => writeFileDurably(file, `${JSON.stringify(state)}\n`),
  };
}

export function budgetFile(stateDir: string): string {
  return path.join(stateDir, 'budget.json');
}

/** What the rest of the state folder proves about the key's past use, beside budget.json. */
export interface PriorUse {
  /** The journal folder was there before this start: a run used the state folder before. */
  stateFolderUsed: boolean;
  /** Instants (ms) of requests the journal and the lock prove were sent (see requestsShownByJournal). */
  requestsAt: readonly number[];
}

/**
 * A store whose load() refuses (BudgetStateLostError) a saved state the rest of the state folder contradicts:
 * none where the folder was used before, or a count below the requests the journal and the lock show for its
 * month or a later one. The budget then starts as from an unreadable file (an estimated month, full windows),
 * never as a first start. `problem` says what was found.
 */
export function checkedBudgetStore(
  inner: BudgetStore,
  file: string,
  prior: PriorUse,
  options: CheckedBudgetStoreOptions = {},
): CheckedBudgetStore {
  const { timeZone = 'UTC', onHandOverWait } = options;
  let problem: string | undefined;
  let target = inner;
  let handOff: HandOffBudgetStore | undefined;
  return {
    get problem() {
      return problem;
    },
    async waitForHandOver() {
      // A daemon that lost this folder is still reporting what it ran: its last sends are not all known yet.
      let waited = false;
      for (;;) {
        const saved = await inner.load().catch(() => undefined);
        if (saved?.handedOverUntil === undefined || saved.handedOverUntil <= Date.now()) return;
        if (!waited) onHandOverWait?.(saved.handedOverUntil);
        waited = true;
        await new Promise((resolve) => setTimeout(resolve, HAND_OVER_RECHECK_MS));
      }
    },
    async load() {
      let saved = await inner.load();
      if (saved?.handedOverUntil !== undefined) {
        const { handedOverUntil: _, ...rest } = saved;
        saved = rest;
      }
      problem = contradiction(saved, file, prior, timeZone);
      if (problem !== undefined) throw new BudgetStateLostError(file, problem);
      return saved;
    },
    save: (state) => target.save(state),
    handOff(untilMs) {
      handOff = handOffBudgetStore(file, untilMs);
      target = handOff;
    },
    handOffDone() {
      handOff?.done();
    },
  };
}

/** How often a daemon waiting for a hand-over reads budget.json again, in ms. */
const HAND_OVER_RECHECK_MS = 200;

export interface CheckedBudgetStoreOptions {
  /** IANA zone of the budget's months. Default 'UTC'. */
  timeZone?: string;
  /** Told once when waitForHandOver() waits for a daemon that lost the folder (until the instant at most). */
  onHandOverWait?: (untilMs: number) => void;
}

export interface CheckedBudgetStore extends BudgetStore {
  /**
   * Resolves once no daemon that lost this state folder may still send (budget.json's handedOverUntil is absent
   * or past): call before Budget.load(), whose windows must hold that daemon's last sends.
   */
  waitForHandOver(): Promise<void>;
  /** Why load() refused the saved state; undefined when it did not. */
  readonly problem: string | undefined;
  /**
   * From now on saves only leave the state for the folder's next owner (see handOffBudgetStore), telling it to
   * wait until `untilMs` (ms since the epoch) at most for this daemon's last requests.
   */
  handOff(untilMs: number): void;
  /** This daemon sends nothing more: the next save tells the next owner to wait no longer. */
  handOffDone(): void;
}

function contradiction(
  saved: BudgetState | undefined,
  file: string,
  prior: PriorUse,
  timeZone: string,
): string | undefined {
  if (saved === undefined) {
    return prior.stateFolderUsed || prior.requestsAt.length > 0
      ? `${file} is missing from a state folder an earlier run used (its journal folder exists)`
      : undefined;
  }
  const month = parseMonthKey(saved.monthKey);
  if (month === undefined) return undefined;
  const { startMs, endMs } = calendarMonthWindow(month.year, month.month, timeZone);
  if (prior.requestsAt.some((at) => at >= endMs)) {
    return `${file} counts requests of ${saved.monthKey}, where the journal and the lock show some since`;
  }
  const shown = prior.requestsAt.filter((at) => at >= startMs).length;
  if (shown <= saved.used) return undefined;
  return (
    `${file} counts ${saved.used} requests in ${saved.monthKey}, ` +
    `where the journal and the lock show at least ${shown}`
  );
}

/** A budget.json the rest of the state folder contradicts (see checkedBudgetStore). */
export class BudgetStateLostError extends Error {
  readonly code: ErrorCode = 'DFW_BUDGET_STATE_LOST';
  readonly file: string;

  constructor(file: string, problem: string) {
    super(
      `${problem}: the month's usage is estimated instead (an even spend so far, at least what the journal ` +
        'shows), the windows are taken as full at start, and the file is rewritten with the next request',
    );
    this.name = 'BudgetStateLostError';
    this.file = file;
  }
}

export interface HandOffBudgetStore extends BudgetStore {
  /** Later saves no longer ask the next owner to wait. */
  done(): void;
}

/**
 * Leaves the month's usage and the last minute's sends to whoever takes the state folder next, after this
 * daemon lost its lock (see Worker): writes only where no budget.json is, or where the one there is the last
 * this store wrote, so the new owner's own file is never overwritten. Until done(), each write asks the next
 * owner to wait until `untilMs` for this daemon's last requests (handedOverUntil).
 */
export function handOffBudgetStore(file: string, untilMs: number): HandOffBudgetStore {
  let lastWritten: string | undefined;
  let sending = true;
  return {
    done() {
      sending = false;
    },
    load: () => Promise.resolve(undefined),
    async save(state) {
      const text = `${JSON.stringify(sending ? { ...state, handedOverUntil: untilMs } : state)}\n`;
      let current: string | undefined;
      try {
        current = await readFile(file, 'utf8');
      } catch (error) {
        if (errorCode(error) !== 'ENOENT') throw error;
      }
      if (current !== undefined && current !== lastWritten) return;
      await mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
      await writeFileDurably(file, text);
      lastWritten = text;
    },
  };
}

/** A budget file that is valid JSON but not a month's usage: damaged, or written by something else. */
export class BudgetStateError extends Error {
  readonly code: ErrorCode = 'DFW_BUDGET_STATE_INVALID';
  readonly file: string;

  constructor(file: string) {
    super(
      `${file} does not hold a month's budget usage ({"monthKey": "YYYY-MM", "used": whole number >= 0, ` +
        '"sentAt": optional list of instants in ms}); usage is estimated instead, the windows are taken as full ' +
        'at start, and the file is rewritten with the next request',
    );
    this.name = 'BudgetStateError';
    this.file = file;
  }
}

function asBudgetState(raw: unknown): BudgetState | undefined {
  if (typeof raw !== 'object' || raw === null) return undefined;
  const { monthKey, used, sentAt, handedOverUntil, writer } = raw as Partial<
    Record<keyof BudgetState, unknown>
  >;
  if (typeof monthKey !== 'string' || parseMonthKey(monthKey) === undefined) return undefined;
  if (typeof used !== 'number' || !Number.isSafeInteger(used) || used < 0) return undefined;
  if (handedOverUntil !== undefined && !isInstant(handedOverUntil)) return undefined;
  const handOver = handedOverUntil === undefined ? {} : { handedOverUntil: handedOverUntil as number };
  if (sentAt === undefined) return { monthKey, used, ...handOver };
  if (!Array.isArray(sentAt) || !sentAt.every(isInstant)) return undefined;
  // A stamp that cannot be read is no reason to refuse the count: the wall clock is trusted instead.
  const stamp = isWriterStamp(writer) ? { writer } : {};
  return { monthKey, used, sentAt: sentAt as number[], ...handOver, ...stamp };
}

function isInstant(value: unknown): boolean {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0;
}
