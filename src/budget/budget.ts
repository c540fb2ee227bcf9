// The key's request budget, shared by every request the daemon makes: per-second and per-minute sliding
// windows, a calendar-month quota with pacing (pacing.ts), and a priority queue so reports never wait behind
// polls (request-queue.ts). What a restart must not forget is stored before a request goes (usage-ledger.ts);
// a 429 pauses every request (rate-limit-pause.ts). Every instant it takes or gives is on the clock's monotonic
// face (`nowMs` included): the wall clock only says which month a request counts in. Its options and the
// shapes it tells are in budget-options.ts.
import type { GateAnswer, RequestGate, SendPermit } from '../api/client.ts';
import type { Operation } from '../api/types.ts';
import { monotonicAt, wallAt, type Clock } from '../clock/clock.ts';
import { monthWindow, type MonthWindow } from './month.ts';
import { paceAt } from './pacing.ts';
import { RateLimitPauses } from './rate-limit-pause.ts';
import { classOf, type RequestClass } from './request-class.ts';
import { RequestQueue, type Waiter } from './request-queue.ts';
import { SlidingWindows } from './sliding-window.ts';
import { memoryBudgetStore } from './store.ts';
import type { BudgetLimits, BudgetOptions, BudgetSnapshot, MonthUsage } from './budget-options.ts';
import type { ErrorCode } from '../errors/catalogue.ts';
import { restoreUsage, UsageLedger, type BudgetLoadResult } from './usage-ledger.ts';

export type { RateLimitPause } from './rate-limit-pause.ts';
export { classOf, type RequestClass } from './request-class.ts';
export type { BudgetLoadResult } from './usage-ledger.ts';
export type { BudgetLimits, BudgetOptions, BudgetSnapshot, MonthUsage } from './budget-options.ts';

export class BudgetExhaustedError extends Error {
  readonly code: ErrorCode = 'DFW_BUDGET_EXHAUSTED';

  constructor(message: string) {
    super(message);
    this.name = 'BudgetExhaustedError';
  }
}

export class Budget implements RequestGate {
  readonly limits: BudgetLimits;
  readonly #clock: Clock;
  readonly #timeZone: string;
  readonly #reserveFraction: number;
  readonly #windows: SlidingWindows;
  /** What the store holds of the month's count and the windows' sends. */
  readonly #ledger: UsageLedger;
  readonly #pauses: RateLimitPauses;
  #reportReserve: number;
  /** The month whose usage is counted: the clock's month, or a later one while the clock is behind it. */
  #month: MonthWindow;
  /** The month the clock is in, kept so a clock behind `#month` does not recompute it on every call. */
  #clockMonth: MonthWindow;
  #used = 0;
  #sentByClass: Record<RequestClass, number> = { report: 0, control: 0, handler: 0, poll: 0 };
  /** Requests waiting to be let through; an abort among them makes the pump look again. */
  readonly #queue = new RequestQueue(() => this.#interrupt?.abort());
  #pumping = false;
  #interrupt: AbortController | undefined;

  constructor(options: BudgetOptions) {
    this.limits = { ...options.limits };
    this.#clock = options.clock;
    this.#timeZone = options.timeZone ?? 'UTC';
    this.#reserveFraction = Math.min(0.9, Math.max(0, options.reserveFraction ?? 0.1));
    this.#reportReserve = options.reportReserve ?? 0;
    this.#ledger = new UsageLedger(
      options.store ?? memoryBudgetStore(),
      this.#clock,
      Math.max(1, options.leaseSize ?? 20),
      options.writerStamp,
    );
    this.#pauses = new RateLimitPauses({
      clock: this.#clock,
      defaultPauseMs: options.rateLimitPauseMs ?? 60_000,
      maxPauseMs: options.retryAfterMaxMs ?? 120_000,
      wake: () => this.#interrupt?.abort(),
      events: options.events,
    });
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
   * Restores this month's usage and the last minute's sends from the store; an unreadable state is estimated,
   * never taken for zero, and a saved count of a later month than the clock's is counted into (never
   * overwritten with the earlier month's): see restoreUsage and `BudgetLoadResult`.
   */
  async load(): Promise<BudgetLoadResult> {
    const now = this.#clock.monotonic();
    this.#rollMonth(now);
    const read = await this.#ledger.read();
    const counted = { month: this.#month, used: this.#used, persistedUsed: this.#ledger.persistedUsed };
    // The saved sends are wall-clock instants (the only time another process shares): read back as of now.
    const restored = restoreUsage(read, counted, this.limits, wallAt(this.#clock, now), this.#timeZone);
    this.#month = restored.month;
    this.#used = restored.used;
    this.#ledger.persistedUsed = restored.persistedUsed;
    this.#windows.restore(
      restored.sentAt.map((at) => monotonicAt(this.#clock, at)),
      now,
    );
    return restored.result;
  }

  /**
   * Writes the exact count and the sends made (on clean shutdown, so the lease's unused part and any send
   * written ahead but not made are given back).
   */
  async flush(): Promise<void> {
    await this.#ledger.flush(() => {
      const now = this.#clock.monotonic();
      this.#rollMonth(now);
      return { monthKey: this.#month.key, used: this.#used, sentAt: this.#windows.recent(now) };
    });
  }

  /**
   * Raises the month's count to `used` when others send with this key too (clustered mode: the count every
   * replica keeps in Redis), so that pacing and the month's allowance see the key's whole usage. A count of
   * another month than the one counted is ignored.
   */
  observeMonthUsed(monthKey: string, used: number): void {
    this.#rollMonth(this.#clock.monotonic());
    if (monthKey === this.#month.key && used > this.#used) this.#used = used;
  }

  set reportReserve(requests: number) {
    this.#reportReserve = Math.max(0, requests);
  }

  get reportReserve(): number {
    return this.#reportReserve;
  }

  /**
   * Hears every answer the service gives (the client's gate calls it). A 429 pauses every request, for
   * Retry-After or the default pause, at most `retryAfterMaxMs` (see RateLimitPauses).
   */
  observe(answer: GateAnswer): void {
    this.#pauses.observe(answer);
  }

  get pausedUntil(): number {
    return this.#pauses.until;
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
  acquire(operation: Operation, signal?: AbortSignal): Promise<SendPermit> {
    return this.#enqueue(classOf(operation), signal);
  }

  #enqueue(cls: RequestClass, signal: AbortSignal | undefined): Promise<SendPermit> {
    if (signal?.aborted) return Promise.reject(signal.reason as Error);
    const granted = this.#queue.add(cls, signal);
    if (this.#pumping) this.#interrupt?.abort();
    else void this.#pump();
    return granted;
  }

  /** Earliest instant a request of this class may be sent (ignoring the queue); Infinity if not this month. */
  earliestSendAt(cls: RequestClass, nowMs = this.#clock.monotonic()): number {
    this.#rollMonth(nowMs);
    const monthLeft = this.limits.perMonth - this.#used;
    const allowance = cls === 'report' ? monthLeft : monthLeft - this.#reportReserve;
    const windowsAt = Math.max(this.#windows.nextFreeAt(nowMs), this.#pauses.until, nowMs);
    if (allowance <= 0) return Math.max(windowsAt, monotonicAt(this.#clock, this.#month.endMs));
    return windowsAt;
  }

  /** The wall-clock instant at monotonic `monotonicMs`, as of now: it names the month and the hour. */
  wallAt(monotonicMs: number): number {
    return wallAt(this.#clock, monotonicMs);
  }

  /** Shortest interval between two requests the per-second and per-minute windows allow on average. */
  get minimumIntervalMs(): number {
    return Math.max(1_000 / this.limits.perSecond, 60_000 / this.limits.perMinute);
  }

  /**
   * Interval between requests that spends what is left of the month (beyond the report reserve and
   * `workAhead`, the requests work is expected to need) evenly until its end.
   */
  idlePaceMs(nowMs = this.#clock.monotonic(), workAhead = 0): number {
    this.#rollMonth(nowMs);
    const spendable = this.limits.perMonth - this.#used - this.#reportReserve - workAhead;
    const timeLeftMs = this.#month.endMs - wallAt(this.#clock, nowMs);
    if (spendable < 1) return Math.max(1, timeLeftMs);
    return Math.max(this.minimumIntervalMs, timeLeftMs / spendable);
  }

  /**
   * True when the month's usage has reached its pace: an even spend of the month so far plus the run-ahead
   * allowance (see paceAt). A re-poll after a hit then waits for the idle pace instead.
   */
  aheadOfPace(nowMs = this.#clock.monotonic()): boolean {
    this.#rollMonth(nowMs);
    return (
      this.#used + 1 > paceAt(this.#month, this.limits, this.#reserveFraction, wallAt(this.#clock, nowMs))
    );
  }

  /** The IANA time zone whose calendar months the month budget counts (DF_BUDGET_TIME_ZONE). */
  get timeZone(): string {
    return this.#timeZone;
  }

  get monthUsed(): number {
    this.#rollMonth(this.#clock.monotonic());
    return this.#used;
  }

  /** The month being counted at `nowMs`, without the windows and pacing figures of snapshot(). */
  month(nowMs = this.#clock.monotonic()): MonthUsage {
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

  snapshot(nowMs = this.#clock.monotonic()): BudgetSnapshot {
    this.#rollMonth(nowMs);
    return {
      second: { used: this.#windows.usedIn(1_000, nowMs), limit: this.limits.perSecond },
      minute: { used: this.#windows.usedIn(60_000, nowMs), limit: this.limits.perMinute },
      month: this.month(nowMs),
      idlePaceMs: this.idlePaceMs(nowMs),
      aheadOfPace: this.aheadOfPace(nowMs),
      pausedUntil: this.#pauses.until,
      pausedForMs: Math.max(0, this.#pauses.until - nowMs),
      waiting: this.#queue.length,
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
  recordSent(nowMs = this.#clock.monotonic()): void {
    this.#rollMonth(nowMs);
    this.#windows.record(nowMs);
    this.#used++;
  }

  async #pump(): Promise<void> {
    this.#pumping = true;
    try {
      while (this.#queue.length > 0) {
        const head = this.#queue.head!;
        const now = this.#clock.monotonic();
        const at = this.earliestSendAt(head.cls, now);
        if (at <= now) {
          if (!this.#ledger.holdsNextSend(this.#used, now)) {
            // Time and the queue may move while the store is written: look again afterwards.
            await this.#writeAhead();
            continue;
          }
          this.#queue.remove(head);
          this.recordSent(now);
          this.#sentByClass[head.cls]++;
          this.#ledger.sendMade();
          head.resolve(this.#permit(now));
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

  /**
   * The permit of a send counted in the windows at `grantedAt`: when the request leaves later, its count moves
   * to that instant, since the service counts arrivals. A send written ahead keeps its written instant in the
   * store until the next write, which holds the moved one.
   */
  #permit(grantedAt: number): SendPermit {
    let countedAt = grantedAt;
    return {
      departed: () => {
        const now = this.#clock.monotonic();
        if (now <= countedAt) return;
        this.#windows.move(countedAt, now);
        countedAt = now;
      },
    };
  }

  /**
   * Stores, before they go, the sends of every waiter that may go when the write's turn comes (one write for
   * all of them), so a crash after it leaves a state that counts them (see UsageLedger.writeAhead).
   */
  async #writeAhead(): Promise<void> {
    let batch: Waiter[] = [];
    try {
      await this.#ledger.writeAhead(
        (startedAt) => {
          batch = this.#queue.first(this.#sendableAt(startedAt));
          const recent = this.#windows.recent(startedAt);
          return { count: batch.length, monthKey: this.#month.key, used: this.#used, recent };
        },
        () => this.#month.key,
      );
    } catch (error) {
      // Unpersisted usage would be forgotten by a crash and the budget overspent after restart: refuse.
      // Waiters aborted (and removed) while the write was under way are refused by nobody.
      for (const waiter of batch) {
        if (!this.#queue.remove(waiter)) continue;
        waiter.reject(
          new BudgetExhaustedError(
            `cannot record budget usage in the state folder (${(error as Error).message}); request not sent`,
          ),
        );
      }
    }
  }

  /** How many of the first waiters may all be sent at `nowMs`, in queue order. */
  #sendableAt(nowMs: number): number {
    this.#rollMonth(nowMs);
    if (nowMs < this.#pauses.until) return 0;
    const room = this.#windows.capacityAt(nowMs);
    const monthLeft = this.limits.perMonth - this.#used;
    let count = 0;
    for (const waiter of this.#queue) {
      const allowance = waiter.cls === 'report' ? monthLeft : monthLeft - this.#reportReserve;
      if (count >= room || count >= allowance) break;
      count++;
    }
    return count;
  }

  /**
   * Starts a new count only when the clock enters a later month. A clock behind the counted month (stepped
   * back, or behind at start) keeps counting into it: usage is never under-counted nor a later month's
   * saved count overwritten with an earlier month's.
   */
  #rollMonth(monotonicMs: number): void {
    const nowMs = wallAt(this.#clock, monotonicMs);
    if (nowMs >= this.#month.startMs && nowMs < this.#month.endMs) return;
    if (nowMs < this.#clockMonth.startMs || nowMs >= this.#clockMonth.endMs) {
      this.#clockMonth = monthWindow(nowMs, this.#timeZone);
    }
    if (this.#clockMonth.key > this.#month.key) {
      this.#month = this.#clockMonth;
      this.#used = 0;
      this.#ledger.persistedUsed = 0;
    }
  }
}
