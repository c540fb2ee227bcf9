// The idle pace, planned from what is known at one instant: the month's budget left, after what the expected
// work will cost (month-forecast.ts), spread over the hours left where work arrives, as learnt in an
// ArrivalProfile. Every hour of the week gets one common interval, except the quiet hours (quiet-hours.ts) and
// the re-polls least likely to find work, which share the slow share (slow-share.ts). Pure: it reads its
// inputs and changes none of them.
import type { MonthUsage } from '../budget/budget.ts';
import { hourOfWeek, type ArrivalProfile } from './arrival-profile.ts';
import {
  coldAndQuiet,
  FORECAST_MARGIN,
  type MonthLeft,
  OVERLOAD_SHARE,
  overloadVerdict,
  RATE_GROUPS,
  REQUESTS_PER_EXECUTION,
  taskForecast,
  type TaskForecast,
} from './month-forecast.ts';
import { QUIET_DOUBT, quietHours, solveScale, type WeighedHour } from './quiet-hours.ts';
import { MAX_SKIP_SHARE, repollThresholdMs, SLOW_SHARE, slowShare } from './slow-share.ts';

const HOUR_MS = 3_600_000;

/** What a pace is planned from, read at one instant. */
export interface PaceInputs {
  nowMs: number;
  /** The served tasks' keys. */
  keys: readonly string[];
  profile: ArrivalProfile;
  /** The budget's month at `nowMs`. */
  month: MonthUsage;
  /** Requests the budget keeps for reports owed. */
  reportReserve: number;
  /** Shortest interval between two requests the per-second and per-minute limits allow on average (ms). */
  minimumIntervalMs: number;
  /** Every task is polled at least this often while the month's budget allows it (ms). */
  maxPollIntervalMs: number;
  /** Executions claimed since the planner was made... */
  claims: number;
  /** ... and the handlers' service calls (ctx.service) meanwhile: as many are forecast per execution. */
  handlerCalls: number;
  /** The previous plan's overload verdict (see OVERLOAD_EXIT_SHARE in month-forecast.ts). */
  wasOverloaded: boolean;
}

/** The idle pace as planned at one instant: interval = `scaleMs` / weight, clamped. */
export interface PacePlan {
  at: number;
  taskCount: number;
  /** Interval of an hour whose weight is 1 (ms); Infinity when nothing may be spent. */
  scaleMs: number;
  /** Longest idle interval the budget affords: `maxPollIntervalMs`, or longer when it cannot. */
  longestMs: number;
  /**
   * Each task's weight by hour of the week (see quietHours), as planned: intervals follow the weights the scale
   * was solved for until the next plan.
   */
  weights: Map<string, Float64Array>;
  /** Each task's expected arrivals per hour, by hour of the week, as planned. */
  rates: Map<string, Float64Array>;
  /**
   * Each task's re-poll threshold by hour of the week (ms): after a hit on an execution that waited less than
   * this, the next is unlikely to be pending and the task waits for its idle pace (0: always re-poll).
   */
  repollAfterMs: Map<string, Float64Array>;
  /**
   * The forecast work costs more than the month has left: each poll then finds work waiting, and a re-poll
   * after a hit would only drain the backlog and come back empty, a request that claims nothing.
   */
  overloaded: boolean;
  /**
   * Overload concluded from fewer than RATE_GROUPS arrivals (steady work the month carries may read so from its
   * first arrival): the plan is made again as often as an arrival would make it.
   */
  doubtful: boolean;
  /** Planned before any arrival was seen: the first ones make a new plan at once. */
  learning: boolean;
  /**
   * Tasks whose work the plan forecasts in full (steady random arrivals, at a rate trusted for the month):
   * their re-polls are paid for by the plan, which spends more in busy hours than an even spend would, and what
   * they cost beyond it comes out of the idle pace at the next plan. Other tasks' re-polls wait while the
   * month's use runs ahead of its pace (Budget.aheadOfPace).
   */
  forecast: Set<string>;
  /** Tasks in a cold start's first hours of next to no work, polled at the longest interval (coldAndQuiet). */
  deferred: Set<string>;
}

/** One task's hour of the week, as planned. */
interface PaceBucket extends WeighedHour, TaskForecast {
  key: string;
  hour: number;
  /** Hours of it left in the month. */
  hours: number;
  /** See PacePlan.repollAfterMs. */
  repollAfterMs: number;
}

/**
 * Plans the idle pace for the rest of the month: what idle polls may spend (the month left, less the report
 * reserve, the forecast work and a margin), spread over the hours left: every task polled at the same interval
 * except in its quiet hours, and at least every `maxPollIntervalMs`. The slow share the quiet hours leave goes
 * to skipping unlikely re-polls, whose saving is spent on polls in turn.
 */
export function planPace(input: PaceInputs): PacePlan {
  const { nowMs, keys, month, profile } = input;
  const taskCount = Math.max(1, keys.length);
  const leftMs = Math.max(0, month.endsAt - nowMs);
  const meanPerHour = profile.meanRatePerHour();
  const monthLeft: MonthLeft = {
    left: month.remaining - input.reportReserve,
    margin: FORECAST_MARGIN * month.limit * (leftMs / (month.endsAt - month.startsAt)),
    leftMs,
    taskCount,
    // Handlers' own service calls (ctx.service) are work too: as many per execution as they made so far.
    perExecution:
      REQUESTS_PER_EXECUTION + (input.claims >= RATE_GROUPS ? input.handlerCalls / input.claims : 0),
    floorPolls: (leftMs / input.maxPollIntervalMs) * taskCount,
  };
  const { overloaded, doubtful } = overloadVerdict(
    profile,
    keys,
    monthLeft,
    meanPerHour,
    input.wasOverloaded,
  );
  const buckets = paceBuckets(input, leftMs, meanPerHour);
  // Batches come when they come: an hour no batch came in yet is no quieter than the others; and a batch is
  // drained by re-polls, none of which is skipped.
  const steady = buckets.filter((b) => !b.batched);
  const share = overloaded ? SLOW_SHARE : plannedSlowShare(input, monthLeft, buckets, steady);
  const quietShare = quietHours(steady, share);
  const skipShare = Math.min(MAX_SKIP_SHARE, Math.max(0, share - quietShare));
  const base = {
    at: nowMs,
    taskCount,
    overloaded,
    doubtful,
    learning: meanPerHour === 0,
    forecast: new Set(buckets.filter((b) => b.random && !b.batched && b.trust >= 1).map((b) => b.key)),
    deferred: new Set(keys.filter((key) => coldAndQuiet(profile, key, leftMs))),
  };
  return settleSpend(input, monthLeft, buckets, steady, skipShare, base);
}

/** Every task's hours of the week (one task '' when none is served), with their rates and hours left. */
function paceBuckets(input: PaceInputs, leftMs: number, meanPerHour: number): PaceBucket[] {
  const { nowMs, keys, profile } = input;
  const hoursLeft = hoursLeftByHourOfWeek(nowMs, input.month.endsAt);
  const buckets: PaceBucket[] = [];
  for (const key of keys.length > 0 ? keys : ['']) {
    const forecast = taskForecast(profile, key, leftMs);
    for (let h = 0; h < 168; h++) {
      // Any instant in that hour of the week: the profile reads nothing else from it.
      const at = nowMs + ((h - hourOfWeek(nowMs) + 168) % 168) * HOUR_MS;
      buckets.push({
        key,
        hour: h,
        rate: profile.ratePerHour(key, at, meanPerHour),
        quietRate: profile.ratePerHour(key, at, meanPerHour, QUIET_DOUBT),
        hours: hoursLeft[h]!,
        ...forecast,
        weight: 1,
        repollAfterMs: 0,
      });
    }
  }
  return buckets;
}

/** Hours left in the month, grouped by hour of the week: a task's expected rate depends on nothing else. */
function hoursLeftByHourOfWeek(nowMs: number, endsAt: number): number[] {
  const hoursLeft = new Array<number>(168).fill(0);
  for (let t = nowMs; t < endsAt;) {
    const end = Math.min(endsAt, (Math.floor(t / HOUR_MS) + 1) * HOUR_MS);
    hoursLeft[hourOfWeek(t)]! += (end - t) / HOUR_MS;
    t = end;
  }
  return hoursLeft;
}

/**
 * The slow share planned against the month's pickups (see slowShare), with the common interval each share
 * gives before skipped re-polls; SLOW_SHARE where the month cannot pace every task.
 */
function plannedSlowShare(
  input: PaceInputs,
  monthLeft: MonthLeft,
  buckets: readonly PaceBucket[],
  steady: PaceBucket[],
): number {
  const { left, margin, floorPolls, leftMs, perExecution } = monthLeft;
  const maxMs = input.maxPollIntervalMs;
  // The common interval a slow share would give, before skipped re-polls.
  const firstSpend = Math.max(
    left - workRequests(buckets, perExecution, undefined, maxMs) - margin,
    OVERLOAD_SHARE * left,
  );
  if (!(firstSpend > floorPolls && leftMs > 0)) return SLOW_SHARE;
  const spans = buckets.filter((b) => b.hours > 0);
  // Where no hour holds a share of the work among the quiet ones (steady work), every share gives the same.
  let sameForAll: number | undefined;
  const intervalAt = (share: number) => {
    if (sameForAll !== undefined) return sameForAll;
    const used = quietHours(steady, share);
    const intervalMs = solveScale(spans, firstSpend, maxMs);
    if (used === 0) sameForAll = intervalMs;
    return intervalMs;
  };
  const expected = buckets.reduce((sum, b) => sum + b.rate * b.hours, 0);
  return slowShare(input.profile.pickups, input.month.startsAt, expected, intervalAt);
}

/**
 * Plans the spend: the re-polls skipped depend on the interval, and the interval on what the skipped re-polls
 * leave to spend; a few rounds settle it (each changes the spend by a fraction of the one before).
 */
function settleSpend(
  input: PaceInputs,
  monthLeft: MonthLeft,
  buckets: readonly PaceBucket[],
  steady: readonly PaceBucket[],
  skipShare: number,
  base: Omit<PacePlan, 'scaleMs' | 'longestMs' | 'weights' | 'rates' | 'repollAfterMs'>,
): PacePlan {
  const { left, margin, leftMs, taskCount, floorPolls } = monthLeft;
  const maxMs = input.maxPollIntervalMs;
  const spans = buckets.filter((b) => b.hours > 0);
  const minimumMs = input.minimumIntervalMs * taskCount;
  let plan: PacePlan | undefined;
  for (let round = 0; round < 3; round++) {
    // Work beyond what the month can carry (overload) still needs polls to be claimed: half of what is left
    // then goes to polls (each brings a report), and the month's pace (the budget's gate) holds them to it.
    const idleShare = left - workRequests(buckets, monthLeft.perExecution, plan, maxMs) - margin;
    const spendable = base.overloaded ? left / 2 : Math.max(idleShare, OVERLOAD_SHARE * left);
    if (spendable < 1 || leftMs === 0) {
      return { ...base, ...byKey(buckets), scaleMs: Infinity, longestMs: Math.max(1, leftMs) };
    }
    if (spendable <= floorPolls) {
      // Not even one poll per task every maxPollIntervalMs: every task at the same, longer interval.
      return { ...base, ...byKey(buckets), scaleMs: Infinity, longestMs: (leftMs * taskCount) / spendable };
    }
    const scaleMs = solveScale(spans, spendable, maxMs);
    for (const b of steady) {
      const intervalMs = Math.min(maxMs, Math.max(minimumMs, scaleMs / b.weight));
      const skips = b.random && b.weight >= 1 && !base.overloaded;
      b.repollAfterMs = skips ? repollThresholdMs(b.rate, intervalMs, skipShare) : 0;
    }
    plan = { ...base, ...byKey(buckets), scaleMs, longestMs: maxMs };
  }
  return plan!;
}

/**
 * Requests the forecast work costs: each execution its report, its handler's calls and, unless skipped as
 * last planned (`plan`), a re-poll.
 */
function workRequests(
  buckets: readonly PaceBucket[],
  perExecution: number,
  plan: PacePlan | undefined,
  maxMs: number,
): number {
  return buckets.reduce(
    (sum, b) => sum + b.rate * b.hours * b.trust * (perExecution - skippedShare(b, plan, maxMs)),
    0,
  );
}

/**
 * The share of a bucket's hits whose re-poll is skipped, as last planned: a hit's execution waited a time
 * spread evenly over the interval, so the share is the threshold's part of it.
 */
function skippedShare(b: PaceBucket, plan: PacePlan | undefined, maxMs: number): number {
  if (!plan || b.repollAfterMs === 0 || !Number.isFinite(plan.scaleMs)) return 0;
  const intervalMs = Math.min(maxMs, plan.scaleMs / b.weight);
  return Math.min(1, b.repollAfterMs / intervalMs);
}

function byKey(buckets: readonly PaceBucket[]): Pick<PacePlan, 'weights' | 'repollAfterMs' | 'rates'> {
  const weights = new Map<string, Float64Array>();
  const repollAfterMs = new Map<string, Float64Array>();
  const rates = new Map<string, Float64Array>();
  for (const b of buckets) {
    let w = weights.get(b.key);
    let s = repollAfterMs.get(b.key);
    let q = rates.get(b.key);
    if (!w) weights.set(b.key, (w = new Float64Array(168)));
    if (!s) repollAfterMs.set(b.key, (s = new Float64Array(168)));
    if (!q) rates.set(b.key, (q = new Float64Array(168)));
    w[b.hour] = b.weight;
    s[b.hour] = b.repollAfterMs;
    q[b.hour] = b.rate;
  }
  return { weights, repollAfterMs, rates };
}
