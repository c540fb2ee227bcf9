// The service's per-key rate limits (part 8): sliding 1 s and 60 s windows and a UTC calendar month.
// Pure: the caller passes the clock's reading, so a month of budget is tested in milliseconds.
import { SERVICE_REQUEST_LIMITS } from '../api/service-limits.ts';
import type { EmulatorLimits } from './types.ts';

export const DEFAULT_LIMITS: EmulatorLimits = { ...SERVICE_REQUEST_LIMITS };

const SECOND_MS = 1000;
const MINUTE_MS = 60_000;

/** One key's use of the limits; a limit of 0 or Infinity is not enforced. */
export interface KeyUsageFigures {
  apiKey: string;
  second: { used: number; limit: number };
  minute: { used: number; limit: number };
  /** The UTC calendar month: requests accepted in it, and its bounds in ms. */
  month: { used: number; limit: number; startsAt: number; endsAt: number };
}

export type LimitDecision = { allowed: true } | { allowed: false; retryAfterSeconds: number };

interface KeyUsage {
  /** Instants of accepted requests within the last minute, ascending. */
  recent: number[];
  /** UTC month the count belongs to, `YYYY-M`. */
  month: string;
  monthCount: number;
}

export class RateLimiter {
  readonly #limits: EmulatorLimits;
  #usage = new Map<string, KeyUsage>();

  constructor(limits: Partial<EmulatorLimits> = {}) {
    this.#limits = { ...DEFAULT_LIMITS, ...limits };
  }

  /**
   * Counts the request when every window has room; a refused request consumes nothing. `earliestMs` is the
   * earliest instant it may have come (see ArrivalWatch): it is counted at the first instant from there that
   * keeps the windows, when that is not later than `nowMs`.
   */
  take(apiKey: string, nowMs: number, earliestMs = nowMs): LimitDecision {
    const usage = this.#usageOf(apiKey, nowMs);
    const fromMs = Math.min(earliestMs, nowMs);
    usage.recent = usage.recent.filter((at) => at > fromMs - MINUTE_MS);
    const countedAt = this.#firstRoomAt(usage, fromMs, nowMs);
    if (countedAt === undefined) {
      const waitMs = Math.max(
        windowWaitMs(usage.recent, this.#limits.perSecond, SECOND_MS, nowMs),
        windowWaitMs(usage.recent, this.#limits.perMinute, MINUTE_MS, nowMs),
        this.#monthWaitMs(usage, nowMs),
      );
      return { allowed: false, retryAfterSeconds: Math.max(1, Math.ceil(waitMs / 1000)) };
    }
    usage.recent.push(countedAt);
    usage.monthCount++;
    return { allowed: true };
  }

  /** The first instant in [fromMs, nowMs] at which every window has room; undefined when there is none. */
  #firstRoomAt(usage: KeyUsage, fromMs: number, nowMs: number): number | undefined {
    if (this.#monthWaitMs(usage, nowMs) > 0) return undefined;
    // Counted in order: never before the last request counted (nor after now, should the clock step back).
    let at = Math.max(fromMs, Math.min(usage.recent.at(-1) ?? fromMs, nowMs));
    // Each step moves past a counted instant in one of the two windows: at most 2 × recent.length steps.
    for (let step = 0; step <= 2 * usage.recent.length && at <= nowMs; step++) {
      const waitMs = Math.max(
        windowWaitMs(usage.recent, this.#limits.perSecond, SECOND_MS, at),
        windowWaitMs(usage.recent, this.#limits.perMinute, MINUTE_MS, at),
      );
      if (waitMs === 0) return at;
      at += waitMs;
    }
    return undefined;
  }

  #monthWaitMs(usage: KeyUsage, nowMs: number): number {
    return isEnforced(this.#limits.perMonth) && usage.monthCount >= this.#limits.perMonth
      ? startOfNextUtcMonth(nowMs) - nowMs
      : 0;
  }

  reset(): void {
    this.#usage.clear();
  }

  /** What each key has used of each window at `nowMs`, for the admin surface and the console. */
  usage(nowMs: number): KeyUsageFigures[] {
    return [...this.#usage.entries()].map(([apiKey, usage]) => ({
      apiKey,
      second: {
        used: usage.recent.filter((at) => at > nowMs - SECOND_MS).length,
        limit: this.#limits.perSecond,
      },
      minute: {
        used: usage.recent.filter((at) => at > nowMs - MINUTE_MS).length,
        limit: this.#limits.perMinute,
      },
      month: {
        used: usage.month === utcMonthOf(nowMs) ? usage.monthCount : 0,
        limit: this.#limits.perMonth,
        startsAt: startOfUtcMonth(nowMs),
        endsAt: startOfNextUtcMonth(nowMs),
      },
    }));
  }

  #usageOf(apiKey: string, nowMs: number): KeyUsage {
    const month = utcMonthOf(nowMs);
    let usage = this.#usage.get(apiKey);
    if (!usage) {
      usage = { recent: [], month, monthCount: 0 };
      this.#usage.set(apiKey, usage);
    } else if (usage.month !== month) {
      usage.month = month;
      usage.monthCount = 0;
    }
    return usage;
  }
}

function isEnforced(limit: number): boolean {
  return limit > 0 && Number.isFinite(limit);
}

/** Milliseconds until the window has a free slot; 0 when it has one now. */
function windowWaitMs(recent: number[], limit: number, windowMs: number, nowMs: number): number {
  if (!isEnforced(limit)) return 0;
  const inWindow = recent.filter((at) => at > nowMs - windowMs);
  if (inWindow.length < limit) return 0;
  // Once this request leaves the window, exactly limit - 1 remain in it.
  return inWindow[inWindow.length - limit]! + windowMs - nowMs;
}

function utcMonthOf(ms: number): string {
  const date = new Date(ms);
  return `${date.getUTCFullYear()}-${date.getUTCMonth()}`;
}

function startOfUtcMonth(ms: number): number {
  const date = new Date(ms);
  return Date.UTC(date.getUTCFullYear(), date.getUTCMonth(), 1);
}

function startOfNextUtcMonth(ms: number): number {
  const date = new Date(ms);
  return Date.UTC(date.getUTCFullYear(), date.getUTCMonth() + 1, 1);
}
