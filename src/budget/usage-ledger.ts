// The budget's account in its store. What a restart must not forget (the month's count, the last minute's
// sends) is written before a request goes: the count as a lease of several requests, the sends as instants
// the windows will hold. restoreUsage() says what a start makes of the state it reads back.
import { wallAt, type Clock } from '../clock/clock.ts';
import { onReaderWallClock, type WriterStamp } from '../clock/writer-stamp.ts';
import { calendarMonthWindow, parseMonthKey, type MonthWindow } from './month.ts';
import type { BudgetState, BudgetStore } from './store.ts';

/**
 * Least time, in ms, that sends written ahead stay usable after their write began. The file holds the end of
 * that time as their instant, so it is never earlier than the real send; a write slower than it is redone.
 */
const MIN_SEND_SLACK_MS = 100;

/**
 * What `load()` found: `fresh` (nothing saved for this month), `restored` (this month's saved count),
 * `estimated` (the saved state could not be read: an even spend of the month so far is assumed, and windows
 * full at the load instant), or
 * `clock-behind` (the saved count belongs to a LATER month than the clock's: the clock is behind, and
 * requests keep counting into that later month until the clock reaches it).
 */
export type BudgetLoadResult = 'fresh' | 'restored' | 'estimated' | 'clock-behind';

/** Sends that may go now, as the budget counts them when their write's turn comes. */
export interface PlannedSends {
  /** How many; none writes nothing. */
  count: number;
  /** The month they count in. */
  monthKey: string;
  /** The month's count before them. */
  used: number;
  /** The windows' send instants at the write's start. */
  recent: number[];
}

export class UsageLedger {
  readonly #store: BudgetStore;
  readonly #clock: Clock;
  readonly #leaseSize: number;
  /** Month usage already persisted: the store always holds at least the real count. */
  persistedUsed = 0;
  /** Sends the store already holds ahead of use: `count` more may go, at or before `until`. */
  #written = { count: 0, until: -Infinity };
  /** How long sends written ahead stay usable; follows how long the store takes to write. */
  #sendSlackMs = MIN_SEND_SLACK_MS;
  /** The store's writes, one after the other, so a later state is never overwritten by an earlier one. */
  #writing: Promise<unknown> = Promise.resolve();

  /** Stamps each write with its process and boot (see WriterStamp); undefined writes none. */
  readonly #stamp: () => WriterStamp | undefined;

  constructor(store: BudgetStore, clock: Clock, leaseSize: number, stamp?: () => WriterStamp | undefined) {
    this.#store = store;
    this.#clock = clock;
    this.#leaseSize = leaseSize;
    this.#stamp = stamp ?? (() => undefined);
  }

  /**
   * The saved state (undefined when nothing was saved), or `unreadable` when the store cannot read it. Its
   * sends are on this process's wall clock: by their monotonic age when the same boot wrote them.
   */
  async read(): Promise<{ saved: BudgetState | undefined } | 'unreadable'> {
    let saved: BudgetState | undefined;
    try {
      saved = await this.#store.load();
    } catch {
      return 'unreadable';
    }
    if (saved?.sentAt === undefined) return { saved };
    const { writer, ...rest } = saved;
    return { saved: { ...rest, sentAt: onReaderWallClock(saved.sentAt, writer, this.#stamp()) } };
  }

  /** `state` as the file holds it: stamped with this process when it has a stamp. */
  #stamped(state: BudgetState): BudgetState {
    const writer = this.#stamp();
    return writer ? { ...state, writer } : state;
  }

  /** True when the store already holds the send after `used` at `nowMs`: in the month's count and in the windows. */
  holdsNextSend(used: number, nowMs: number): boolean {
    return used + 1 <= this.persistedUsed && this.#written.count > 0 && nowMs <= this.#written.until;
  }

  /** One of the sends written ahead went. */
  sendMade(): void {
    this.#written.count--;
  }

  /**
   * Stores, before they go, the sends `plan` counts when the write's turn comes (one write for all of them):
   * their instants in the windows and, when the lease is used up, a new one for the month. A crash after it
   * then leaves a state that counts them, so the next run waits for them in its windows and its month. Rejects
   * with the store's error; `monthKey()` is the month counted once the write is done.
   */
  async writeAhead(plan: (startedAt: number) => PlannedSends, monthKey: () => string): Promise<void> {
    let startedAt = 0;
    let count = 0;
    await this.#persist(() => {
      startedAt = this.#clock.monotonic();
      const sends = plan(startedAt);
      count = sends.count;
      // Nothing may go any more (aborted, or a 429 paused all): the budget looks again.
      if (count === 0) return undefined;
      const until = startedAt + this.#sendSlackMs;
      const used =
        sends.used + count > this.persistedUsed
          ? sends.used + Math.max(count, this.#leaseSize)
          : this.persistedUsed;
      // Monotonic instants here; the file holds them on the wall clock, which the next process can read.
      const sentAt = [...sends.recent, ...new Array<number>(count).fill(until)].map((at) =>
        wallAt(this.#clock, at),
      );
      const state = this.#stamped({ monthKey: sends.monthKey, used, sentAt });
      return {
        state,
        saved: () => {
          // The month may have turned during the write: a lease of the month before is no lease of this one.
          if (state.monthKey === monthKey()) this.persistedUsed = used;
          this.#written = { count, until };
        },
      };
    });
    // A write that outlasted its slack is redone with a longer one: the next should fit in it.
    if (count > 0) this.#sendSlackMs = Math.max(MIN_SEND_SLACK_MS, 2 * (this.#clock.monotonic() - startedAt));
  }

  /**
   * Writes the exact state `final` gives when the write's turn comes: from then on a request needs a write of
   * its own, so the lease's unused part and any send written ahead but not made are given back.
   */
  flush(final: () => BudgetState): Promise<void> {
    // `final` gives its sends as monotonic instants, like writeAhead's plan; the file holds wall-clock ones.
    return this.#persist(() => {
      const made = final();
      const state = this.#stamped(
        made.sentAt === undefined
          ? made
          : { ...made, sentAt: made.sentAt.map((at) => wallAt(this.#clock, at)) },
      );
      this.persistedUsed = state.used;
      this.#written = { count: 0, until: -Infinity };
      return state;
    });
  }

  /**
   * Runs the store's writes one at a time, in call order. `build` makes the state when the write's turn
   * comes (undefined: nothing to write); `saved` runs as soon as it is stored, before any later write begins.
   */
  #persist(build: () => BudgetState | { state: BudgetState; saved: () => void } | undefined): Promise<void> {
    const run = this.#writing.then(async () => {
      const next = build();
      if (next === undefined) return;
      const { state, saved } = 'state' in next ? next : { state: next, saved: () => undefined };
      await this.#store.save(state);
      saved();
    });
    this.#writing = run.catch(() => undefined);
    return run;
  }
}

/** The month's count as the budget holds it: the month counted, its usage, and how much of it is stored. */
export interface CountedUsage {
  month: MonthWindow;
  used: number;
  persistedUsed: number;
}

/** What a start makes of the saved state: the count to go on with, and the sends the windows restart from. */
export interface RestoredUsage extends CountedUsage {
  result: BudgetLoadResult;
  sentAt: number[];
}

/**
 * A previous run's count carries over, and so do its windows. When the saved state cannot be read, usage is
 * estimated as an even spend of the month so far, rather than assumed to be zero, and the windows as full at
 * `nowMs`: what is unknown must not let the month be overspent nor the service's windows overrun. A saved
 * count of a later month than the one counted is kept and counted into (see BudgetLoadResult).
 */
export function restoreUsage(
  read: { saved: BudgetState | undefined } | 'unreadable',
  counted: CountedUsage,
  limits: { perSecond: number; perMinute: number; perMonth: number },
  nowMs: number,
  timeZone: string,
): RestoredUsage {
  const { month } = counted;
  if (read === 'unreadable') {
    const elapsed = (nowMs - month.startMs) / (month.endMs - month.startMs);
    const used = Math.max(counted.used, Math.ceil(limits.perMonth * elapsed));
    // The previous run may have sent up to every window's limit just before it stopped.
    const fullest = Math.max(0, ...[limits.perSecond, limits.perMinute].filter(Number.isFinite));
    const sentAt = new Array<number>(fullest).fill(nowMs);
    return { result: 'estimated', month, used, persistedUsed: used, sentAt };
  }
  const { saved } = read;
  // Whatever month they counted in, the last minute's sends still count in the service's windows. Every one
  // was sent before this run began: an instant written ahead beyond `nowMs` is only a bound, brought back to it.
  const sentAt = saved?.sentAt?.map((at) => Math.min(at, nowMs)) ?? [];
  if (saved && saved.monthKey === month.key) {
    return {
      result: 'restored',
      month,
      used: Math.max(counted.used, saved.used),
      persistedUsed: Math.max(counted.persistedUsed, saved.used),
      sentAt,
    };
  }
  const savedMonth = saved && parseMonthKey(saved.monthKey);
  // Month keys are `YYYY-MM`: as text they sort in time order.
  if (saved && savedMonth && saved.monthKey > month.key) {
    // Requests counted before load() were made while the clock was behind: they add to that later month.
    return {
      result: 'clock-behind',
      month: calendarMonthWindow(savedMonth.year, savedMonth.month, timeZone),
      used: counted.used + saved.used,
      persistedUsed: saved.used,
      sentAt,
    };
  }
  return { result: 'fresh', ...counted, sentAt };
}
