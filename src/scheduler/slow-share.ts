// The slow share: how much of the work to come may wait longer than the common interval, so that the month's
// 95th percentile of pickup stays at that interval. Quiet hours take it first (quiet-hours.ts); what they
// leave goes to skipping the re-polls least likely to find work. Used by the pace plan (pace-plan.ts); the
// measurements behind the constants are in .github/CONTRIBUTING.md, "Pacing: measurement history".
import type { PickupTally } from './pickup-tally.ts';

const HOUR_MS = 3_600_000;
/** The share of the month's pickups that may wait longer than the common interval: the 5% p95 leaves slow. */
const SLOW_GOAL = 0.05;
/** Standard deviations of the Poisson count of the slow pickups to come kept from the slow share, for chance. */
const SLOW_DOUBT = 0.5;
/**
 * The share of the work to come kept for what is slow outside quiet hours and skipped re-polls (a poll held
 * back by the per-second or per-minute limit, a busy hour read quiet).
 */
const SLOW_TAIL = 0.001;
/**
 * The slow share is never planned below this: when the month's pickups were already slower than the goal, a
 * common interval long enough to put them back under it would be paid for by every hour of the month left.
 */
const MIN_SLOW_SHARE = 0.02;
/** Bisection steps for the slow share: (SLOW_GOAL − MIN_SLOW_SHARE) / 2⁷, a quarter of a thousandth. */
const SLOW_SHARE_STEPS = 7;
/** The slow share where it is not planned against the month's pickups (under overload, every pickup is late). */
export const SLOW_SHARE = 0.04;
/**
 * At most this share of the work is left slow by skipped re-polls: the rest of the slow share is a margin for
 * slow work no estimate counts (the first arrivals after a quiet hour, a rate misread).
 */
export const MAX_SKIP_SHARE = 0.02;

/**
 * The share of the work left in the month (`expected` arrivals) that may wait longer than the common interval:
 * what keeps the month's slow pickups (those that waited longer than it, so far and to come) within SLOW_GOAL,
 * less a margin for chance (SLOW_DOUBT) and for the others' tail (SLOW_TAIL). A longer common interval leaves
 * fewer of the past pickups slow, a larger slow share makes it shorter: the largest share that holds is found
 * by bisection between MIN_SLOW_SHARE and SLOW_GOAL. `intervalAt` gives the common interval planned with a share.
 */
export function slowShare(
  pickups: PickupTally,
  monthStartsAt: number,
  expected: number,
  intervalAt: (share: number) => number,
): number {
  if (expected <= 0) return MIN_SLOW_SHARE;
  const allowed = SLOW_GOAL * (pickups.count(monthStartsAt) + expected) - SLOW_TAIL * expected;
  const holds = (share: number) => {
    const slowSoFar = pickups.countAbove(monthStartsAt, intervalAt(share));
    const toCome = share * expected;
    return slowSoFar + toCome + SLOW_DOUBT * Math.sqrt(toCome) <= allowed;
  };
  if (holds(SLOW_GOAL)) return SLOW_GOAL;
  let low = MIN_SLOW_SHARE;
  if (!holds(low)) return low;
  let high = SLOW_GOAL;
  for (let i = 0; i < SLOW_SHARE_STEPS; i++) {
    const mid = (low + high) / 2;
    if (holds(mid)) low = mid;
    else high = mid;
  }
  return low;
}

/**
 * After a hit on an execution that waited `w` ms, the next one is pending with probability 1 − e^(−λw) ≈ λw
 * (λ the rate, arrivals being Poisson); skipping the re-poll leaves it one interval T slower. With w spread
 * evenly over [0, T], skipping below a wait x leaves λx²/(2T) of the hits' executions slow and saves x/T of
 * the re-polls, cheapest first: x = √(2 × T × slowShare / λ), at most T.
 */
export function repollThresholdMs(ratePerHour: number, intervalMs: number, slowShare: number): number {
  if (slowShare <= 0) return 0;
  const perMs = ratePerHour / HOUR_MS;
  if (perMs <= 0) return intervalMs;
  return Math.min(intervalMs, Math.sqrt((2 * intervalMs * slowShare) / perMs));
}
