// The key's request budget, shared by every request the daemon makes: per-second and per-minute sliding
// windows, a calendar-month quota with pacing, and a priority gate so reports never wait behind polls.
// What a restart must not forget (the month's count, the last minute's sends) is stored before a request goes.
import type { GateAnswer, RequestGate } from '../api/client.ts';
import type { Operation } from '../api/types.ts';
import type { Clock } from '../clock/clock.ts';
import { calendarMonthWindow, monthWindow, parseMonthKey, type MonthWindow } from './month.ts';
import { SlidingWindows } from './sliding-window.ts';
import { memoryBudgetStore, type BudgetState, type BudgetStore } from './store.ts';

export interface BudgetLimits {
  /** Requests in any 1 s window. Default 5. */
  perSecond: number;
  /** Requests in any 60 s window. Default 50. */
  perMinute: number;
  /** Requests per calendar month in `timeZone`. Default 40,000. */
  perMonth: number;
}

export interface BudgetOptions {
  limits: BudgetLimits;
  clock: Clock;
  /** IANA zone whose month boundaries reset the monthly quota. Default 'UTC'. */
  timeZone?: string;
  /**
   * How far (0..0.9, a fraction of the month) polls may run ahead of an even spend of the month; the allowance
   * shrinks with the month, so that even sustained overload spends the month to its end. Default 0.1.
   */
  reserveFraction?: number;
  /** Requests kept back in the month for reports of claimed executions: only reports may use them. */
  reportReserve?: number;
  /** Added to each sliding window to absorb latency jitter between us and the service. Default 200 ms. */
  safetyMarginMs?: number;
  /** Persists the month's usage and the windows' recent sends; default in memory. */
  store?: BudgetStore;
  /** Month usage is persisted ahead of use in leases of this many requests, so a crash never undercounts. */
  leaseSize?: number;
  /** Pause of every request after a 429 that carries no Retry-After, in ms. Default 60_000. */
  rateLimitPauseMs?: number;
  /**
   * Longest pause a 429 may impose, in ms, whatever its Retry-After asks (seconds or an HTTP date, sane or
   * not): past it one request tries again, and another 429 pauses anew. Default 120_000.
   */
  retryAfterMaxMs?: number;
  /** Told once per pause a 429 starts or lengthens (not of a 429 that falls within one already running). */
  onPause?: (pause: RateLimitPause) => void;
}

/** A pause of every request after a 429: what the service asked, and what the budget took. */
export interface RateLimitPause {
  operation: Operation;
  /** From the answer's Retry-After, in ms; undefined when it had none (or none readable). */
  retryAfterMs: number | undefined;
  /** The pause taken, in ms: Retry-After (or the default pause) capped at `retryAfterMaxMs`. */
  pauseMs: number;
  /** Clock instant the pause ends. */
  until: number;
}

/**
 * Who asks: decides the order of the queue and which share of the month may be used. `handler`: a handler's
 * own calls through `ctx.service`, below the daemon's reports and control requests, above idle polls; like
 * every class but `report`, it may not use the report reserve.
 */
export type RequestClass = 'report' | 'control' | 'handler' | 'poll';

export function classOf(operation: Operation): RequestClass {
  // The reporter reads an execution back (executions.get) only to learn whether a report the service refused
  // was in fact applied: that read finishes a report, so it needs the report reserve as much as the report
  // does. As 'control' it would wait for the month's end once only the reserve is left, holding its slot.
  if (operation === 'executions.report' || operation === 'executions.get') return 'report';
  if (operation === 'tasks.poll') return 'poll';
  return 'control';
}

const PRIORITY: Record<RequestClass, number> = { report: 0, control: 1, handler: 2, poll: 3 };

/**
 * The run-ahead allowance shrinks with the time left, down to this much of it: polls may still run a little
 * ahead in the month's last hours, yet the pace reaches the whole month only in its last hour.
 */
const MIN_ALLOWANCE_SPAN_MS = 6 * 3_600_000;

/**
 * Least time, in ms, that sends written ahead stay usable after their write began. The file holds the end of
 * that time as their instant, so it is never earlier than the real send; a write slower than it is redone.
 */
const MIN_SEND_SLACK_MS = 100;

export class BudgetExhaustedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'BudgetExhaustedError';
  }
}

/**
 * What `load()` found: `fresh` (nothing saved for this month), `restored` (this month's saved count),
 * `estimated` (the saved state could not be read: an even spend of the month so far is assumed, and windows
 * full at the load instant), or
 * `clock-behind` (the saved count belongs to a LATER month than the clock's: the clock is behind, and
 * requests keep counting into that later month until the clock reaches it).
 */
export type BudgetLoadResult = 'fresh' | 'restored' | 'estimated' | 'clock-behind';

interface Waiter {
  cls: RequestClass;
  seq: number;
  resolve: () => void;
  reject: (error: Error) => void;
}

/** The calendar month being counted and what it has used. */
export interface MonthUsage {
  key: string;
  used: number;
  limit: number;
  remaining: number;
  startsAt: number;
  endsAt: number;
}

export interface BudgetSnapshot {
  second: { used: number; limit: number };
  minute: { used: number; limit: number };
  month: MonthUsage;
  /** Interval between idle polls (across all tasks) that spends the month evenly; Infinity when nothing is left. */
  idlePaceMs: number;
  /** True while work-driven polling has run further ahead of an even spend than the reserve allows. */
  aheadOfPace: boolean;
  pausedUntil: number;
  waiting: number;
}

export class Budget implements RequestGate {
  readonly limits: BudgetLimits;
  readonly #clock: Clock;
  readonly #timeZone: string;
  readonly #reserveFraction: number;
  readonly #windows: SlidingWindows;
  readonly #store: BudgetStore;
  readonly #leaseSize: number;
  readonly #rateLimitPauseMs: number;
  readonly #retryAfterMaxMs: number;
  readonly #onPause: ((pause: RateLimitPause) => void) | undefined;
  #reportReserve: number;
  /** The month whose usage is counted: the clock's month, or a later one while the clock is behind it. */
  #month: MonthWindow;
  /** The month the clock is in, kept so a clock behind `#month` does not recompute it on every call. */
  #clockMonth: MonthWindow;
  #used = 0;
  /** Month usage already persisted: the store always holds at least the real count. */
  #persistedCeiling = 0;
  /** Sends the store already holds ahead of use: `count` more may go, at or before `until`. */
  #written = { count: 0, until: -Infinity };
  /** How long sends written ahead stay usable; follows how long the store takes to write. */
  #sendSlackMs = MIN_SEND_SLACK_MS;
  /** The store's writes, one after the other, so a later state is never overwritten by an earlier one. */
  #writing: Promise<unknown> = Promise.resolve();
  #pausedUntil = 0;
  #sentByClass: Record<RequestClass, number> = { report: 0, control: 0, handler: 0, poll: 0 };
  #waiters: Waiter[] = [];
  #seq = 0;
  #pumping = false;
  #interrupt: AbortController | undefined;

  constructor(options: BudgetOptions) {
    this.limits = { ...options.limits };
    this.#clock = options.clock;
    this.#timeZone = options.timeZone ?? 'UTC';
    this.#reserveFraction = Math.min(0.9, Math.max(0, options.reserveFraction ?? 0.1));
    this.#reportReserve = options.reportReserve ?? 0;
    this.#store = options.store ?? memoryBudgetStore();
    this.#leaseSize = Math.max(1, options.leaseSize ?? 20);
    this.#rateLimitPauseMs = options.rateLimitPauseMs ?? 60_000;
    this.#retryAfterMaxMs = options.retryAfterMaxMs ?? 120_000;
    this.#onPause = options.onPause;
    this.#windows = new SlidingWindows(
      [
        { name: 'second', limit: this.limits.perSecond, windowMs: 1_000 },
        { name: 'minute', limit: this.limits.perMinute, windowMs: 60_000 },
      ],
      options.safetyMarginMs ?? 200,
    );
    this.#month = monthWindow(this.#clock.now(), this.#timeZone);
    this.#clockMonth = this.#month;
  }

  /**
   * Restores this month's usage and the last minute's sends from the store (a previous run's count carries
   * over, and so do its windows). When the saved state cannot be read, usage is estimated as an even spend of
   * the month so far, rather than assumed to be zero, and the windows as full at the load instant: what is
   * unknown must not let the month be overspent nor the service's windows overrun. A saved count of a later
   * month than the clock's is kept and counted into (never overwritten with the earlier month's): see
   * `BudgetLoadResult`.
   */
  async load(): Promise<BudgetLoadResult> {
    const now = this.#clock.now();
    this.#rollMonth(now);
    let saved;
    try {
      saved = await this.#store.load();
    } catch {
      const elapsed = (now - this.#month.startMs) / (this.#month.endMs - this.#month.startMs);
      this.#used = Math.max(this.#used, Math.ceil(this.limits.perMonth * elapsed));
      this.#persistedCeiling = this.#used;
      // The previous run may have sent up to every window's limit just before it stopped.
      const fullest = Math.max(0, ...[this.limits.perSecond, this.limits.perMinute].filter(Number.isFinite));
      this.#windows.restore(new Array<number>(fullest).fill(now), now);
      return 'estimated';
    }
    // Whatever month they counted in, the last minute's sends still count in the service's windows. Every one
    // was sent before this run began: an instant written ahead beyond `now` is only a bound, brought back to it.
    const sentBefore = saved?.sentAt?.map((at) => Math.min(at, now)) ?? [];
    this.#windows.restore(sentBefore, now);
    if (saved && saved.monthKey === this.#month.key) {
      this.#used = Math.max(this.#used, saved.used);
      this.#persistedCeiling = Math.max(this.#persistedCeiling, saved.used);
      return 'restored';
    }
    const savedMonth = saved && parseMonthKey(saved.monthKey);
    // Month keys are `YYYY-MM`: as text they sort in time order.
    if (saved && savedMonth && saved.monthKey > this.#month.key) {
      // Requests counted before load() were made while the clock was behind: they add to that later month.
      this.#month = calendarMonthWindow(savedMonth.year, savedMonth.month, this.#timeZone);
      this.#used += saved.used;
      this.#persistedCeiling = saved.used;
      return 'clock-behind';
    }
    return 'fresh';
  }

  /**
   * Writes the exact count and the sends made (on clean shutdown, so the lease's unused part and any send
   * written ahead but not made are given back).
   */
  async flush(): Promise<void> {
    await this.#persist(() => {
      const now = this.#clock.now();
      this.#rollMonth(now);
      // From here a request needs a write of its own, queued behind this one: this state is final for them.
      this.#persistedCeiling = this.#used;
      this.#written = { count: 0, until: -Infinity };
      return { monthKey: this.#month.key, used: this.#used, sentAt: this.#windows.recent(now) };
    });
  }

  /**
   * Raises the month's count to `used` when others send with this key too (clustered mode: the count every
   * replica keeps in Redis), so that pacing and the month's allowance see the key's whole usage. A count of
   * another month than the one counted is ignored.
   */
  observeMonthUsed(monthKey: string, used: number): void {
    this.#rollMonth(this.#clock.now());
    if (monthKey === this.#month.key && used > this.#used) this.#used = used;
  }

  set reportReserve(requests: number) {
    this.#reportReserve = Math.max(0, requests);
  }

  get reportReserve(): number {
    return this.#reportReserve;
  }

  /**
   * Hears every answer the service gives (the client's gate calls it). A 429 means the whole key is over a
   * limit, whichever request met it: every request pauses, for Retry-After or the default pause. Callers that
   * retry after a 429 just retry: their acquire waits for the pause. Concurrent 429s: the longest pause wins.
   * No pause is longer than `retryAfterMaxMs`: a service (or a proxy) asking for years must not silence the
   * daemon, reports included, for as long as it runs.
   */
  observe(answer: GateAnswer): void {
    if (answer.status !== 429) return;
    const asked = answer.retryAfterMs;
    const pauseMs = Math.min(Math.max(0, asked ?? this.#rateLimitPauseMs), this.#retryAfterMaxMs);
    const untilMs = this.#clock.now() + pauseMs;
    if (untilMs > this.#pausedUntil) {
      this.#pausedUntil = untilMs;
      this.#interrupt?.abort();
      try {
        this.#onPause?.({ operation: answer.operation, retryAfterMs: asked, pauseMs, until: untilMs });
      } catch {
        // A listener's failure must not change how the budget reacts.
      }
    }
  }

  get pausedUntil(): number {
    return this.#pausedUntil;
  }

  /**
   * A gate onto this budget whose requests all queue as `cls`, whatever their operation: the client of
   * `ctx.service` uses `gateFor('handler')`. Answers are observed like any other (a 429 pauses every class).
   */
  gateFor(cls: RequestClass): RequestGate {
    return {
      acquire: (_operation, signal) => this.#enqueue(cls, signal),
      observe: (answer) => this.observe(answer),
    };
  }

  /** The RequestGate of the service client: resolves when this request may be sent, and counts it. */
  acquire(operation: Operation, signal?: AbortSignal): Promise<void> {
    return this.#enqueue(classOf(operation), signal);
  }

  #enqueue(cls: RequestClass, signal: AbortSignal | undefined): Promise<void> {
    if (signal?.aborted) return Promise.reject(signal.reason as Error);
    return new Promise<void>((resolve, reject) => {
      const onAbort = () => {
        const i = this.#waiters.indexOf(waiter);
        if (i >= 0) {
          this.#waiters.splice(i, 1);
          reject(signal?.reason as Error);
          this.#interrupt?.abort();
        }
      };
      // The daemon passes the same long-lived signal with every request: a settled waiter must let go of it.
      const waiter: Waiter = {
        cls,
        seq: this.#seq++,
        resolve: () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        },
        reject: (error) => {
          signal?.removeEventListener('abort', onAbort);
          reject(error);
        },
      };
      this.#waiters.push(waiter);
      this.#waiters.sort((a, b) => PRIORITY[a.cls] - PRIORITY[b.cls] || a.seq - b.seq);
      signal?.addEventListener('abort', onAbort, { once: true });
      if (this.#pumping) this.#interrupt?.abort();
      else void this.#pump();
    });
  }

  /** Earliest instant a request of this class may be sent (ignoring the queue); Infinity if not this month. */
  earliestSendAt(cls: RequestClass, nowMs = this.#clock.now()): number {
    this.#rollMonth(nowMs);
    const monthLeft = this.limits.perMonth - this.#used;
    const allowance = cls === 'report' ? monthLeft : monthLeft - this.#reportReserve;
    const windowsAt = Math.max(this.#windows.nextFreeAt(nowMs), this.#pausedUntil, nowMs);
    if (allowance <= 0) return Math.max(windowsAt, this.#month.endMs);
    return windowsAt;
  }

  /** Shortest interval between two requests the per-second and per-minute windows allow on average. */
  get minimumIntervalMs(): number {
    return Math.max(1_000 / this.limits.perSecond, 60_000 / this.limits.perMinute);
  }

  /**
   * Interval between requests that spends what is left of the month (beyond the report reserve and
   * `workAhead`, the requests work is expected to need) evenly until its end.
   */
  idlePaceMs(nowMs = this.#clock.now(), workAhead = 0): number {
    this.#rollMonth(nowMs);
    const spendable = this.limits.perMonth - this.#used - this.#reportReserve - workAhead;
    const timeLeftMs = this.#month.endMs - nowMs;
    if (spendable < 1) return Math.max(1, timeLeftMs);
    return Math.max(this.minimumIntervalMs, timeLeftMs / spendable);
  }

  /**
   * True when the month's usage has reached its pace: an even spend of the month so far plus the run-ahead
   * allowance. A re-poll after a hit then waits for the idle pace instead.
   */
  aheadOfPace(nowMs = this.#clock.now()): boolean {
    this.#rollMonth(nowMs);
    return this.#used + 1 > this.#paceAt(nowMs);
  }

  /**
   * Requests the month's pace allows by `nowMs`: an even spend of the month so far, plus an allowance of
   * `reserveFraction` of the month scaled by the time left (at least 6 hours' worth, and at least a minute's
   * limit: a burst the service's windows allow anyway), capped at the month.
   */
  #paceAt(nowMs: number): number {
    const { startMs, endMs } = this.#month;
    const monthMs = endMs - startMs;
    const elapsed = Math.min(1, Math.max(0, (nowMs - startMs) / monthMs));
    const left = Math.max(1 - elapsed, MIN_ALLOWANCE_SPAN_MS / monthMs);
    const perMonth = this.limits.perMonth;
    return Math.min(
      perMonth,
      perMonth * elapsed + Math.max(this.#minAllowance, perMonth * this.#reserveFraction * left),
    );
  }

  get #minAllowance(): number {
    return Math.min(this.limits.perMinute, this.limits.perMonth);
  }

  get monthUsed(): number {
    this.#rollMonth(this.#clock.now());
    return this.#used;
  }

  /** The month being counted at `nowMs`, without the windows and pacing figures of snapshot(). */
  month(nowMs = this.#clock.now()): MonthUsage {
    this.#rollMonth(nowMs);
    return {
      key: this.#month.key,
      used: this.#used,
      limit: this.limits.perMonth,
      remaining: Math.max(0, this.limits.perMonth - this.#used),
      startsAt: this.#month.startMs,
      endsAt: this.#month.endMs,
    };
  }

  snapshot(nowMs = this.#clock.now()): BudgetSnapshot {
    this.#rollMonth(nowMs);
    return {
      second: { used: this.#windows.usedIn(1_000, nowMs), limit: this.limits.perSecond },
      minute: { used: this.#windows.usedIn(60_000, nowMs), limit: this.limits.perMinute },
      month: this.month(nowMs),
      idlePaceMs: this.idlePaceMs(nowMs),
      aheadOfPace: this.aheadOfPace(nowMs),
      pausedUntil: this.#pausedUntil,
      waiting: this.#waiters.length,
    };
  }

  /** Requests of a class this budget let through since it was made (the planner forecasts handlers' calls). */
  sent(cls: RequestClass): number {
    return this.#sentByClass[cls];
  }

  /**
   * Counts a request sent now without queueing: for the synchronous month simulation and benchmarks that
   * drive the same pacing code. The daemon itself always goes through `acquire`.
   */
  recordSent(nowMs = this.#clock.now()): void {
    this.#rollMonth(nowMs);
    this.#windows.record(nowMs);
    this.#used++;
  }

  async #pump(): Promise<void> {
    this.#pumping = true;
    try {
      while (this.#waiters.length > 0) {
        const head = this.#waiters[0]!;
        const now = this.#clock.now();
        const at = this.earliestSendAt(head.cls, now);
        if (at <= now) {
          if (!this.#writtenAhead(now)) {
            // Time and the queue may move while the store is written: look again afterwards.
            await this.#writeAhead();
            continue;
          }
          this.#waiters.shift();
          this.recordSent(now);
          this.#sentByClass[head.cls]++;
          this.#written.count--;
          head.resolve();
          continue;
        }
        this.#interrupt = new AbortController();
        try {
          await this.#clock.sleep(at - now, this.#interrupt.signal);
        } catch {
          // Interrupted: a new waiter, a pause or an abort changed the picture; look again.
        }
      }
    } finally {
      this.#pumping = false;
      this.#interrupt = undefined;
    }
  }

  /** True when the store already holds one more send at `nowMs`: in the month's count and in the windows. */
  #writtenAhead(nowMs: number): boolean {
    return (
      this.#used + 1 <= this.#persistedCeiling && this.#written.count > 0 && nowMs <= this.#written.until
    );
  }

  /**
   * Stores, before they go, the sends of every waiter that may go now (one write for all of them): their
   * instants in the windows and, when the lease is used up, a new one for the month. A crash after it then
   * leaves a state that counts them, so the next run waits for them in its windows and its month.
   */
  async #writeAhead(): Promise<void> {
    let startedAt = 0;
    let batch: Waiter[] = [];
    try {
      await this.#persist(() => {
        startedAt = this.#clock.now();
        batch = this.#waiters.slice(0, this.#sendableAt(startedAt));
        // Nothing may go any more (aborted, or a 429 paused all): the pump looks again.
        if (batch.length === 0) return undefined;
        const until = startedAt + this.#sendSlackMs;
        const used =
          this.#used + batch.length > this.#persistedCeiling
            ? this.#used + Math.max(batch.length, this.#leaseSize)
            : this.#persistedCeiling;
        const sentAt = [...this.#windows.recent(startedAt), ...new Array<number>(batch.length).fill(until)];
        const state = { monthKey: this.#month.key, used, sentAt };
        return {
          state,
          saved: () => {
            // The month may have turned during the write: a lease of the month before is no lease of this one.
            if (state.monthKey === this.#month.key) this.#persistedCeiling = used;
            this.#written = { count: batch.length, until };
          },
        };
      });
    } catch (error) {
      // Unpersisted usage would be forgotten by a crash and the budget overspent after restart: refuse.
      // Waiters aborted (and removed) while the write was under way are refused by nobody.
      for (const waiter of batch) {
        const i = this.#waiters.indexOf(waiter);
        if (i < 0) continue;
        this.#waiters.splice(i, 1);
        waiter.reject(
          new BudgetExhaustedError(
            `cannot record budget usage in the state folder (${(error as Error).message}); request not sent`,
          ),
        );
      }
      return;
    }
    // A write that outlasted its slack is redone with a longer one: the next should fit in it.
    if (batch.length > 0) {
      this.#sendSlackMs = Math.max(MIN_SEND_SLACK_MS, 2 * (this.#clock.now() - startedAt));
    }
  }

  /** How many of the first waiters may all be sent at `nowMs`, in queue order. */
  #sendableAt(nowMs: number): number {
    this.#rollMonth(nowMs);
    if (nowMs < this.#pausedUntil) return 0;
    const room = this.#windows.capacityAt(nowMs);
    const monthLeft = this.limits.perMonth - this.#used;
    let count = 0;
    for (const waiter of this.#waiters) {
      const allowance = waiter.cls === 'report' ? monthLeft : monthLeft - this.#reportReserve;
      if (count >= room || count >= allowance) break;
      count++;
    }
    return count;
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

  /**
   * Starts a new count only when the clock enters a later month. A clock behind the counted month (stepped
   * back, or behind at start) keeps counting into it: usage is never under-counted nor a later month's
   * saved count overwritten with an earlier month's.
   */
  #rollMonth(nowMs: number): void {
    if (nowMs >= this.#month.startMs && nowMs < this.#month.endMs) return;
    if (nowMs < this.#clockMonth.startMs || nowMs >= this.#clockMonth.endMs) {
      this.#clockMonth = monthWindow(nowMs, this.#timeZone);
    }
    if (this.#clockMonth.key > this.#month.key) {
      this.#month = this.#clockMonth;
      this.#used = 0;
      this.#persistedCeiling = 0;
    }
  }
}
