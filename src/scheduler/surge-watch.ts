// Tells when an hour planned quiet turns busy (work moved to it, or a rate was misread), so that the planner
// polls it at the common interval at once rather than a day or two later, when the profile has learnt it. The
// measurements behind the constants are in .github/CONTRIBUTING.md, "Pacing: measurement history".

const HOUR_MS = 3_600_000;
/** Arrivals within this long are counted to tell whether a quiet hour turned busy... */
const SURGE_WINDOW_MS = 30 * 60_000;
/** ... when the hour's planned rate would bring as many this rarely... */
const SURGE_ODDS = 1e-3;
/**
 * ... and once found surging, it stays so while its last SURGE_WINDOW_MS bring as many as the planned rate
 * would this rarely: a lull within a new peak does not send its next arrivals to the quiet interval.
 */
const SURGE_STAY_ODDS = 0.05;
/** Arrivals kept per task for that. */
const SURGE_MEMORY = 16;

export class SurgeWatch {
  /** Each task's latest arrivals (createdAt, ms), oldest first, and when it was last found surging. */
  readonly #recent = new Map<string, { arrivals: number[]; surgedAt?: number }>();

  /** Forgets the tasks not in `keys`. */
  keepOnly(keys: ReadonlySet<string>): void {
    for (const key of this.#recent.keys()) if (!keys.has(key)) this.#recent.delete(key);
  }

  /** One execution of `key` arrived at `arrivedAt` (its createdAt). */
  arrival(key: string, arrivedAt: number): void {
    let recent = this.#recent.get(key);
    if (!recent) this.#recent.set(key, (recent = { arrivals: [] }));
    recent.arrivals.push(arrivedAt);
    if (recent.arrivals.length > SURGE_MEMORY) recent.arrivals.shift();
  }

  /**
   * True when the task's arrivals of the last SURGE_WINDOW_MS are more than `ratePerHour` (the hour's planned
   * rate) would bring but once in a thousand times (SURGE_ODDS), or once in twenty (SURGE_STAY_ODDS) when it
   * was found so within the last SURGE_WINDOW_MS.
   */
  surging(key: string, ratePerHour: number, nowMs: number): boolean {
    const recent = this.#recent.get(key);
    if (!recent) return false;
    const count = recent.arrivals.filter((at) => at > nowMs - SURGE_WINDOW_MS).length;
    const was = recent.surgedAt !== undefined && nowMs - recent.surgedAt <= SURGE_WINDOW_MS;
    const odds = poissonTail(count, (ratePerHour * SURGE_WINDOW_MS) / HOUR_MS);
    const surging = odds < (was ? SURGE_STAY_ODDS : SURGE_ODDS);
    if (surging) recent.surgedAt = nowMs;
    return surging;
  }
}

/** P(N ≥ k) for N Poisson with mean `mean`. */
function poissonTail(k: number, mean: number): number {
  let term = Math.exp(-mean);
  let below = 0;
  for (let i = 0; i < k; i++) {
    below += term;
    term *= mean / (i + 1);
  }
  return Math.max(0, 1 - below);
}
