// Delay between a failed attempt and the next one, the one formula for every retry in df-worker (handler
// attempts, reports, polls, the task list at start; in clustered mode Redis's reconnections and the shared
// budget's retries, through clustered/redis.ts reconnectDelayMs): exponential with full jitter, so many
// workers retrying the same flaky dependency spread out instead of hitting it in lockstep. The daemon's base and cap come from
// DF_RETRY_BASE_MS and DF_ERROR_BACKOFF_MAX_MS. Here, beside the clock, so every layer may use it.

export interface BackoffOptions {
  /** Ceiling of the first delay, in milliseconds. Default 1000. */
  baseMs: number;
  /** Cap on any delay's ceiling, in milliseconds. Default 30000. */
  maxMs: number;
  /** Source of randomness in [0, 1). Default Math.random; tests pass a fixed one. */
  random?: () => number;
}

/** For a handler run outside the daemon (runTaskLocally) without options; the daemon passes its config. */
export const DEFAULT_BACKOFF: BackoffOptions = { baseMs: 1000, maxMs: 30_000 };

/** Upper bound of the delay before retry number `retry` (1 = after the first failed attempt). */
export function backoffCeilingMs(retry: number, options: BackoffOptions = DEFAULT_BACKOFF): number {
  return Math.max(0, Math.min(options.maxMs, options.baseMs * 2 ** (retry - 1)));
}

/** Delay before retry number `retry`: uniformly random in [0, ceiling] (full jitter). */
export function backoffDelayMs(retry: number, options: BackoffOptions = DEFAULT_BACKOFF): number {
  const random = options.random ?? Math.random;
  const ceiling = backoffCeilingMs(retry, options);
  return Math.min(ceiling, Math.max(0, Math.floor(random() * ceiling)));
}
