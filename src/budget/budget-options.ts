// What a Budget is built from (its limits and options, each with its default and unit) and what it tells of
// itself (the month being counted, a snapshot for the status page and metrics).
import type { Clock } from '../clock/clock.ts';
import type { WriterStamp } from '../clock/writer-stamp.ts';
import type { EventSink } from '../events/worker-events.ts';
import type { BudgetStore } from './store.ts';

export interface BudgetLimits {
  /** Requests in any 1 s window (the service's: api/service-limits.ts). */
  perSecond: number;
  /** Requests in any 60 s window. */
  perMinute: number;
  /** Requests per calendar month in `timeZone`. */
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
  /**
   * Stamps what the store saves with the writing process and boot (systemWriterStamp for a budget on the
   * system's clock), so a restart on the same boot trusts the saved sends' monotonic age. Default none.
   */
  writerStamp?: () => WriterStamp | undefined;
  /** Pause of every request after a 429 that carries no Retry-After, in ms. Default 60_000. */
  rateLimitPauseMs?: number;
  /**
   * Longest pause a 429 may impose, in ms, whatever its Retry-After asks (seconds or an HTTP date, sane or
   * not): past it one request tries again, and another 429 pauses anew. Default 120_000.
   */
  retryAfterMaxMs?: number;
  /**
   * Where each pause a 429 starts or lengthens is told (`rateLimited`; not a 429 that falls within one already
   * running). Default: none.
   */
  events?: Pick<EventSink, 'emit'>;
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
  /** Monotonic instant a 429's pause ends (see pausedForMs for display). */
  pausedUntil: number;
  /** What is left of that pause at the snapshot's instant, in ms; 0 when none runs. */
  pausedForMs: number;
  waiting: number;
}
