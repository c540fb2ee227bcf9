// What the rest of the month must carry, as the pace plan (pace-plan.ts) reads it from an ArrivalProfile: how
// far each task's rate is a forecast, whether the work is more than the month's budget can carry (overload),
// and which tasks are in a cold start's first hours of next to no work. The measurements behind the constants
// are in .github/CONTRIBUTING.md, "Pacing: measurement history".
import type { ArrivalProfile } from './arrival-profile.ts';

const HOUR_MS = 3_600_000;
/** Share of the month, released evenly as it passes, that idle polling leaves for work beyond the forecast. */
export const FORECAST_MARGIN = 0.005;
/** Requests an execution costs beyond the poll that found it, at most: its report and the re-poll after it. */
export const REQUESTS_PER_EXECUTION = 2;
/**
 * Arrivals (or batches) seen before a task's rate is trusted (to skip a re-poll, to forecast handlers' calls):
 * a backlog found at start is no rate, and by the tenth arrival a backlog reads as a batch (always re-polled).
 */
export const RATE_GROUPS = 10;
/** The work is more than the month can carry when idle polls would be left less than this share of it... */
export const OVERLOAD_SHARE = 0.05;
/**
 * ... and, once concluded, stays so until they would be left this share: a rate near the limit crosses it back
 * and forth, and each crossing back re-polls after every hit, requests that come back empty.
 */
const OVERLOAD_EXIT_SHARE = 0.15;
/** Overload is concluded from the work's rate taken this many standard deviations (Poisson) higher... */
const OVERLOAD_DOUBT = 2;
/** ... once the work has been watched this long: the seconds after a start say nothing of a month. */
const OVERLOAD_WATCH_MS = 30_000;
/** A task whose arrivals come this many at a time on average works in batches. */
const BATCHED = 3;
/** How many times as long as a task was watched its rate is projected ahead (a day → the month). */
const FORECAST_REACH = 30;
/** Batches seen before a batched task's rate is projected over the rest of the month in full... */
const FORECAST_GROUPS = 30;
/**
 * ... but this share of it is trusted from the first batch: idle polls that spend as if batches were rare would
 * run the month up to its pace by the first busy days, and drain each batch at the idle pace from there.
 */
const BATCH_TRUST_MIN = 0.5;
/**
 * A cold start's first hours: a task watched at least COLD_AFTER_MS (nothing learnt before) whose arrivals,
 * taken COLD_DOUBT standard deviations higher (at least one arrival), come at fewer than COLD_RATE an hour,
 * waits the longest interval until watched COLD_UNTIL_MS or COLD_SHARE of the month left, whichever is
 * shorter. With nothing learnt, the even spend would poll hours of next to no work as often as any; where the
 * work was steady after all, at most COLD_SHARE of the month's pickups are slowed. The first arrival ends it.
 */
const COLD_AFTER_MS = 4 * HOUR_MS;
const COLD_RATE = 0.5;
const COLD_DOUBT = 2;
const COLD_UNTIL_MS = 24 * HOUR_MS;
const COLD_SHARE = 0.03;

/** What the month leaves idle polls, in requests, and the figures the pace is planned by. */
export interface MonthLeft {
  /** Requests left, less the report reserve. */
  left: number;
  /** Kept for work beyond the forecast (FORECAST_MARGIN). */
  margin: number;
  leftMs: number;
  taskCount: number;
  /** Requests an execution costs beyond its poll: REQUESTS_PER_EXECUTION and its handler's service calls. */
  perExecution: number;
  /** Polls that every task polled every `maxPollIntervalMs` to the month's end would spend. */
  floorPolls: number;
}

/** How a task's rate serves as the month's forecast. */
export interface TaskForecast {
  batched: boolean;
  /** Its arrivals come one at a time at random, at a known rate: a re-poll may be skipped. */
  random: boolean;
  /** How far its rate is trusted as the month's forecast (0–1). */
  trust: number;
}

export function taskForecast(profile: ArrivalProfile, key: string, leftMs: number): TaskForecast {
  // A rate watched for minutes is no month's forecast: it is projected FORECAST_REACH times as far ahead as
  // it was watched. For work in batches, a few batches are no rate either: trusted as FORECAST_GROUPS are seen.
  const batched = profile.batchSize(key) >= BATCHED;
  // Skipping a re-poll rests on a known rate and on arrivals that come one at a time at random: where work
  // comes in pairs or bursts, a hit says the rest of its group is pending.
  const random = profile.groups(key) >= RATE_GROUPS && !profile.clustered(key);
  const trust = Math.min(
    1,
    (FORECAST_REACH * profile.watchedMs(key)) / Math.max(1, leftMs),
    batched ? Math.max(BATCH_TRUST_MIN, profile.groups(key) / FORECAST_GROUPS) : 1,
  );
  return { batched, random, trust };
}

/**
 * Whether the work is more than the month can carry: a rate sustained beyond it, not a busy hour or a burst.
 * Each task's overall rate (fading by half a week) is taken as if it held to the month's end, work in batches
 * left out (one batch is no rate; re-polls drain it at the service's pace, the run-ahead allowance holds that
 * to the month's). The sum is taken OVERLOAD_DOUBT standard deviations higher: the tasks' counts are
 * independent, so their variances add (a doubt per task would add up to a false overload on many quiet tasks),
 * and at least one arrival is counted over the time watched, so a quiet start is no certain zero. Each task's
 * rate leans on `meanPerHour` (the average task's) while thin. `doubtful`: concluded from fewer than RATE_GROUPS
 * arrivals.
 */
export function overloadVerdict(
  profile: ArrivalProfile,
  keys: readonly string[],
  monthLeft: MonthLeft,
  meanPerHour: number,
  wasOverloaded: boolean,
): { overloaded: boolean; doubtful: boolean } {
  const { left, margin, perExecution } = monthLeft;
  const steadyKeys = keys.filter((key) => profile.batchSize(key) < BATCHED);
  const sumRate = steadyKeys.reduce((sum, key) => sum + profile.overallRatePerHour(key, meanPerHour), 0);
  const watchedMs = Math.max(0, ...keys.map((k) => profile.watchedMs(k)));
  const variance = Math.max(
    steadyKeys.reduce((sum, key) => sum + profile.overallRateVariance(key), 0),
    watchedMs > 0 ? (HOUR_MS / watchedMs) ** 2 : 0,
  );
  const sustained = (sumRate + OVERLOAD_DOUBT * Math.sqrt(variance)) * (monthLeft.leftMs / HOUR_MS);
  // The verdict holds until the month has room by OVERLOAD_EXIT_SHARE once it rests on a rate (RATE_GROUPS
  // arrivals seen): the first minutes' doubt alone can read overload, and must not keep it.
  const seen = steadyKeys.reduce((sum, key) => sum + profile.groups(key), 0);
  const overloadShare = wasOverloaded && seen >= RATE_GROUPS ? OVERLOAD_EXIT_SHARE : OVERLOAD_SHARE;
  const overloaded =
    left - perExecution * sustained - margin < overloadShare * left && watchedMs >= OVERLOAD_WATCH_MS;
  return { overloaded, doubtful: overloaded && seen < RATE_GROUPS };
}

/** True in a cold start's first hours while next to no work comes (see COLD_RATE). */
export function coldAndQuiet(profile: ArrivalProfile, key: string, leftMs: number): boolean {
  const watchedMs = profile.watchedMs(key);
  if (watchedMs < COLD_AFTER_MS || watchedMs >= Math.min(COLD_UNTIL_MS, COLD_SHARE * leftMs)) return false;
  const count = profile.arrivals(key);
  return (count + COLD_DOUBT * Math.sqrt(Math.max(1, count))) / (watchedMs / HOUR_MS) < COLD_RATE;
}
