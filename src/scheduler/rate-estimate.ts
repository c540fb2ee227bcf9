// How a bucket of arrivals and watched time becomes a rate: the arithmetic under ArrivalProfile. Arrivals are
// random (Poisson), so a bucket's own figure is believed as far as it differs from a broader estimate by more
// than chance. The measurements behind the constants are in .github/CONTRIBUTING.md, "Pacing: measurement
// history".

const HOUR_MS = 3_600_000;
/**
 * An hour-of-the-day bucket fades by half every this many passes of its hour (weekdays apart from weekends):
 * four weekdays, or two weekends. Fewer leave a quiet hour's figure on one or two arrivals, too few to rank by.
 */
const DAY_HALF_LIFE_PASSES = 4;
/** How many standard deviations (of a Poisson count) a bucket's count must differ by to be believed. */
const SIGNIFICANCE = 2;
/** Arrivals' worth of the broader estimate a bucket's own figure starts from. */
const PSEUDO = 0.2;
/**
 * An hour of the day leans on the hours this close to it (pooled, weekdays or weekends as it) before the task's
 * overall rate: nights are next to nights, so a night hour after one pass, with no arrival or one, reads as
 * quiet as a stretch of night hours with a few arrivals in all does.
 */
const NEIGHBOURS = 1;

export interface Bucket {
  /** Arrivals seen (faded). */
  count: number;
  /** Time observed, in ms (faded alike). */
  exposureMs: number;
  /** When the figures were last faded. */
  at: number;
}

/**
 * Arrivals per hour in a bucket, given the broader estimate `prior` (per hour). Arrivals are random: what a
 * bucket saw is only believed as far as it differs from the prior by more than chance would (a Poisson count
 * is within about two square roots of its mean), so an hour with 2 arrivals and one with none, of a task that
 * gets one an hour, both read as one an hour, while an hour that stays empty where 15 were expected, or busy
 * where none were, reads as it is within a pass or two.
 */
export function rate(b: Bucket, prior: number, spread: number, deviations = 0): number {
  const hours = b.exposureMs / HOUR_MS;
  // The bucket's own figure, with one pseudo-arrival's worth of the prior.
  const own =
    (prior > 0 ? (b.count + PSEUDO) / (hours + PSEUDO / prior) : b.count / (hours + 1)) +
    (deviations * Math.sqrt(spread * (b.count + 1))) / Math.max(hours, 1e-9);
  const expected = prior * hours;
  // A Poisson count of batches of `spread` arrivals has `spread` times the variance of single arrivals.
  const surprise = (b.count - expected) ** 2 / (SIGNIFICANCE ** 2 * spread * Math.max(expected, 1));
  const weight = Math.min(1, surprise);
  return weight * own + (1 - weight) * prior;
}

/**
 * Arrivals per hour in a bucket that weighs `prior` (per hour) as `priorHours` watched: what it saw, once it
 * has watched a few times as long, whether or not that differs from the prior by more than chance would. With
 * `deviations`, its count is taken that many standard deviations higher.
 */
export function leaning(
  b: Bucket,
  prior: number,
  priorHours: number,
  spread: number,
  deviations = 0,
): number {
  const count = b.count + deviations * Math.sqrt(spread * (b.count + 1));
  return (count + prior * priorHours) / (b.exposureMs / HOUR_MS + priorHours);
}

/**
 * Adds watched time to an hour-of-the-day bucket, fading what it held by half every DAY_HALF_LIFE_PASSES hours
 * watched: a bucket forgets as it learns anew, not as time passes, so an hour of the weekday rests on its last
 * four weekdays whatever weekend lies between, and an hour of the weekend on its last two weekends.
 */
export function watch(b: Bucket, exposureMs: number, nowMs: number): void {
  const keep = 0.5 ** (exposureMs / (DAY_HALF_LIFE_PASSES * HOUR_MS));
  b.count *= keep;
  b.exposureMs = b.exposureMs * keep + exposureMs;
  b.at = nowMs;
}

/** Adds arrivals and watched time to a bucket, fading what it held by half every `halfLifeMs` of time. */
export function add(b: Bucket, count: number, exposureMs: number, nowMs: number, halfLifeMs: number): void {
  if (nowMs > b.at) {
    const keep = b.at === 0 ? 1 : 0.5 ** ((nowMs - b.at) / halfLifeMs);
    b.count *= keep;
    b.exposureMs *= keep;
    b.at = nowMs;
  }
  b.count += count;
  b.exposureMs += exposureMs;
}

/** The hours of the day within NEIGHBOURS of `hour` (of weekdays, or of weekends, as `hour`), pooled. */
export function neighbourhood(day: readonly Bucket[], hour: number): Bucket {
  const base = hour >= 24 ? 24 : 0;
  const pooled: Bucket = { count: 0, exposureMs: 0, at: 0 };
  for (let d = -NEIGHBOURS; d <= NEIGHBOURS; d++) {
    const b = day[base + ((((hour - base + d) % 24) + 24) % 24)]!;
    pooled.count += b.count;
    pooled.exposureMs += b.exposureMs;
  }
  return pooled;
}
