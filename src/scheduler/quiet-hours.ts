// Which hours of the week are quiet, and how much less often they are polled: the weight of each hour's polls
// (its interval is the common interval / weight). Used by the pace plan (pace-plan.ts); the measurements behind
// the constants are in .github/CONTRIBUTING.md, "Pacing: measurement history".

const HOUR_MS = 3_600_000;
/** A quiet hour gets less than this share of the typical arrival's hour rate... */
const QUIET_RATE = 0.25;
/**
 * ... even with its rate taken this many standard deviations (of its Poisson count) higher, so that an hour of
 * steady work left empty by chance is not read quiet.
 */
export const QUIET_DOUBT = 1;
/** Quiet hours are taken, quietest first, until they hold this many times the slow share of the work. */
const QUIET_SHARE = 1.25;
/** The quietest of them, while together they hold no more than this share of the work, wait the longest... */
const FLOOR_SHARE = 0.005;
/** ... if their rate is under this share of the typical arrival's hour rate (a weekend night). */
const FLOOR_RATE = 0.01;
/** Where some hours are quiet, the hours at least this share of the typical arrival's hour rate... */
const BUSY_RATE = 0.5;
/** ... are polled this many times as often as the common interval (steady work, with no quiet hour, is not). */
const BUSY_WEIGHT = 1.1;
/** Small enough that an hour of this weight is always polled at the longest interval. */
const QUIET_WEIGHT = 1e-9;

/** One task's hour of the week, as weighed here. */
export interface WeighedHour {
  /** Expected arrivals per hour. */
  rate: number;
  /** ... taken QUIET_DOUBT standard deviations higher: the rate an hour must be quiet by. */
  quietRate: number;
  /** Weight of its polls: 1, more in the busiest hours, less in quiet ones (interval = common one / weight). */
  weight: number;
}

/**
 * Weighs the hours of the week (per task) and returns the slow share the quiet ones use. Quiet are the
 * quietest, each expected to get less than QUIET_RATE of the typical arrival's hour (even with QUIET_DOUBT),
 * until they hold QUIET_SHARE times `slowShare` of the work; every other hour gets weight 1 (BUSY_WEIGHT in
 * the busiest). For the 95th percentile of pickup the best use of polls is all-or-nothing by hour: an arrival
 * in a quiet hour may be among the slowest 5%, one in any other waits at most the common interval.
 *
 * Quiet hours holding up to `slowShare` of the work wait the longest interval. Holding more, the quietest up to
 * FLOOR_SHARE (under FLOOR_RATE) still do, and the others get weights in proportion to their rates, min(1,
 * c × rate), with c such that `slowShare` of the work waits longer than the common interval (a pickup 1 / weight
 * times as long leaves share × (1 − weight) of it slower): each poll saved in an hour slows pickups in
 * proportion to its rate. Rates from a short or even history are all alike: then nothing is quiet.
 */
export function quietHours(hours: WeighedHour[], slowShare: number): number {
  for (const b of hours) b.weight = 1;
  const quietShare = slowShare * QUIET_SHARE;
  // Shares of a week's work (each hour of the week once), not of the hours left in the month: the slow 5% is
  // the month's, and in its last days the hours left are no week's mix.
  const total = hours.reduce((sum, b) => sum + b.rate, 0);
  if (total <= 0) return 0;
  const typical = hours.reduce((sum, b) => sum + b.rate * b.rate, 0) / total;
  const quiet: WeighedHour[] = [];
  let share = 0;
  let floorShare = 0;
  for (const b of hours.filter((x) => x.quietRate < QUIET_RATE * typical).sort((x, y) => x.rate - y.rate)) {
    if (share >= quietShare) break;
    const m = b.rate / total;
    if (share + m <= FLOOR_SHARE && b.rate < FLOOR_RATE * typical) {
      floorShare += m;
      b.weight = QUIET_WEIGHT;
    } else quiet.push(b);
    share += m;
  }
  if (quiet.length > 0 || floorShare > 0) {
    for (const b of hours) if (b.rate >= BUSY_RATE * typical) b.weight = BUSY_WEIGHT;
  }
  if (share <= slowShare) {
    for (const b of quiet) b.weight = QUIET_WEIGHT;
    return share;
  }
  proportionalWeights(quiet, total, slowShare - floorShare);
  return slowShare;
}

/**
 * Gives the `quiet` hours weights min(1, c × rate), with c such that `target` of the work (`total` arrivals an
 * hour over the week) waits longer than the common interval. That share only falls as c grows: bisection.
 */
function proportionalWeights(quiet: WeighedHour[], total: number, target: number): void {
  const weightAt = (b: WeighedHour, c: number) => Math.max(QUIET_WEIGHT, Math.min(1, c * b.rate));
  const slowAt = (c: number) => quiet.reduce((sum, b) => sum + (b.rate / total) * (1 - weightAt(b, c)), 0);
  let low = 0;
  let high = 1;
  while (slowAt(high) > target && high < 1e12) high *= 2;
  for (let i = 0; i < 60; i++) {
    const mid = (low + high) / 2;
    if (slowAt(mid) > target) low = mid;
    else high = mid;
  }
  for (const b of quiet) b.weight = weightAt(b, high);
}

/**
 * The scale s (ms) at which polls at interval min(maxMs, s / weight), over every span of `hours` at a
 * `weight`, spend `polls`.
 */
export function solveScale(spans: { hours: number; weight: number }[], polls: number, maxMs: number): number {
  // With the weights in falling order, the first j are paced by the scale, the rest by maxMs:
  // polls = HOUR × (sum of hours × weight over the first j / scale + sum of hours over the rest / maxMs).
  const sorted = [...spans].sort((a, b) => b.weight - a.weight);
  let paced = 0;
  let capped = sorted.reduce((sum, r) => sum + r.hours, 0);
  for (let j = 0; j < sorted.length; j++) {
    paced += sorted[j]!.hours * sorted[j]!.weight;
    capped -= sorted[j]!.hours;
    const scaleMs = paced / (polls / HOUR_MS - capped / maxMs);
    const next = sorted[j + 1];
    // Consistent when the j-th is paced (its interval under maxMs) and the next is not.
    if (scaleMs > 0 && scaleMs / sorted[j]!.weight <= maxMs && (!next || scaleMs / next.weight >= maxMs)) {
      return scaleMs;
    }
  }
  // Every hour capped: polls at maxMs everywhere spend less than allowed (the plan handles this before).
  return maxMs * (sorted[0]?.weight ?? 1);
}
