// What a replayed month comes to: pickup latency percentiles, requests, 429s, and when the month ran out.
import { SERVICE_REQUEST_LIMITS } from '../api/service-limits.ts';
import type { ClaimRecord, ReplayResult, ReplaySummary } from './types.ts';

export function summarize(result: ReplayResult, perMonth = SERVICE_REQUEST_LIMITS.perMonth): ReplaySummary {
  const pickups = result.claims
    .filter((c) => c.claimedAt !== null)
    .map((c) => c.claimedAt! - c.arrivedAt)
    .sort((a, b) => a - b);
  const accepted = result.requests.filter((r) => r.status !== 429).sort((a, b) => a.at - b.at);
  const exhaustedAt = accepted.length >= perMonth ? accepted[perMonth - 1]!.at : null;
  const polls = result.requests.filter((r) => r.kind === 'poll');
  return {
    name: result.name,
    executions: result.claims.length,
    claimed: pickups.length,
    neverClaimed: result.claims.length - pickups.length,
    pickup: {
      p50: percentile(pickups, 0.5),
      p95: percentile(pickups, 0.95),
      p99: percentile(pickups, 0.99),
      max: pickups.at(-1) ?? NaN,
      mean: pickups.length === 0 ? NaN : pickups.reduce((sum, p) => sum + p, 0) / pickups.length,
    },
    requests: accepted.length,
    rateLimited: result.requests.length - accepted.length,
    exhaustedOnDay:
      exhaustedAt === null ? null : Math.floor((exhaustedAt - result.startsAt) / 86_400_000) + 1,
    lastPollAt: polls.length === 0 ? null : Math.max(...polls.map((p) => p.at)),
  };
}

/** The value below which `q` (0..1) of the sorted values fall (nearest rank); NaN when there are none. */
export function percentile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
}

/** Most requests the service accepted in any `windowMs` (sliding). */
export function busiestWindow(result: ReplayResult, windowMs: number): number {
  const at = result.requests
    .filter((r) => r.status !== 429)
    .map((r) => r.at)
    .sort((a, b) => a - b);
  let most = 0;
  for (let i = 0, first = 0; i < at.length; i++) {
    while (at[i]! - at[first]! >= windowMs) first++;
    most = Math.max(most, i - first + 1);
  }
  return most;
}

/** Mean and p95 pickup per day of the month (1-based), by arrival day. */
export function pickupByDay(result: ReplayResult): { day: number; mean: number; p95: number }[] {
  const byDay = new Map<number, number[]>();
  for (const c of result.claims) {
    if (c.claimedAt === null) continue;
    const day = Math.floor((c.arrivedAt - result.startsAt) / 86_400_000) + 1;
    let list = byDay.get(day);
    if (!list) byDay.set(day, (list = []));
    list.push(c.claimedAt - c.arrivedAt);
  }
  return [...byDay.entries()]
    .sort((a, b) => a[0] - b[0])
    .map(([day, list]) => {
      list.sort((a, b) => a - b);
      return { day, mean: list.reduce((s, v) => s + v, 0) / list.length, p95: percentile(list, 0.95) };
    });
}

/** A replayed month's polls and pickups in the hours of one rate (see byRate). */
export interface RateShare {
  /** Expected arrivals an hour, as the workload defines them. */
  ratePerHour: number;
  /** Hours of the month at that rate. */
  hours: number;
  polls: number;
  arrivals: number;
  /** Executions that waited longer than the threshold given, or were never claimed. */
  slow: number;
}

/**
 * Where a month's polls went and where its slow pickups fell, by the workload's rate in the hour of each poll
 * and arrival (busiest first): on time-varying work, what tells two pollers with the same p95 apart. A poll
 * saved where few arrive costs few slow pickups; one saved in a peak, many.
 */
export function byRate(
  result: ReplayResult,
  ratePerHour: (t: number) => number,
  slowAboveMs: number,
): RateShare[] {
  const shares = new Map<number, RateShare>();
  const share = (t: number) => {
    const rate = ratePerHour(t);
    let s = shares.get(rate);
    if (!s) shares.set(rate, (s = { ratePerHour: rate, hours: 0, polls: 0, arrivals: 0, slow: 0 }));
    return s;
  };
  for (let t = result.startsAt; t < result.endsAt; t += 3_600_000) {
    share(t + 1_800_000).hours += Math.min(3_600_000, result.endsAt - t) / 3_600_000;
  }
  for (const r of result.requests) if (r.kind === 'poll') share(r.at).polls++;
  for (const c of result.claims) {
    const s = share(c.arrivedAt);
    s.arrivals++;
    if (isSlow(c, slowAboveMs)) s.slow++;
  }
  return [...shares.values()].sort((a, b) => b.ratePerHour - a.ratePerHour);
}

/**
 * A replayed month's polls, arrivals and slow pickups (over `slowAboveMs`, or never claimed) in [fromMs, toMs):
 * what a cold start's first week cost beside a warm one's.
 */
export function spentIn(
  result: ReplayResult,
  fromMs: number,
  toMs: number,
  slowAboveMs: number,
): { polls: number; arrivals: number; slow: number } {
  const inside = (t: number) => t >= fromMs && t < toMs;
  const claims = result.claims.filter((c) => inside(c.arrivedAt));
  return {
    polls: result.requests.filter((r) => r.kind === 'poll' && inside(r.at)).length,
    arrivals: claims.length,
    slow: claims.filter((c) => isSlow(c, slowAboveMs)).length,
  };
}

/** Pickups of the arrivals in a workload's peak hours: how many, and their p95 in ms. */
export interface PeakPickups {
  arrivals: number;
  /** p95 pickup of those claimed (ms); NaN when none was. */
  p95: number;
}

/** How soon a month followed a pattern that moved at `movesAt` (see followedMove). */
export interface MoveFollowed {
  /** The first UTC day starting at or after the move that holds a peak hour. */
  day: { startsAt: number; endsAt: number } | undefined;
  /** The pickups in the peak hours of that day... */
  first: PeakPickups;
  /** ... in the (old) peak hours of the week before the move... */
  oldPeaks: PeakPickups;
  /** ... and in the new peak hours of that week, while they were quiet. */
  whileQuiet: PeakPickups;
}

/**
 * Whether the new peak hours of a pattern that moved at `movesAt` were polled as the old ones were from their
 * first day, or waited as the quiet hours they used to be. Peak hours are those at the workload's highest rate
 * in the month (`ratePerHour`, the workload's own).
 */
export function followedMove(
  result: ReplayResult,
  ratePerHour: (t: number) => number,
  movesAt: number,
): MoveFollowed {
  const day = 86_400_000;
  const week = 7 * day;
  let peak = 0;
  for (let t = result.startsAt; t < result.endsAt; t += 3_600_000) {
    peak = Math.max(peak, ratePerHour(t + 1_800_000));
  }
  const pickups = (rate: (t: number) => number, fromMs: number, toMs: number): PeakPickups => {
    const inside = result.claims.filter(
      (c) => c.arrivedAt >= fromMs && c.arrivedAt < toMs && rate(c.arrivedAt) === peak,
    );
    const waits = inside.flatMap((c) => (c.claimedAt === null ? [] : [c.claimedAt - c.arrivedAt]));
    waits.sort((a, b) => a - b);
    return { arrivals: inside.length, p95: waits.length > 0 ? percentile(waits, 0.95) : Number.NaN };
  };
  let firstDay: MoveFollowed['day'];
  for (let t = Math.ceil(movesAt / day) * day; t < result.endsAt && !firstDay; t += 3_600_000) {
    if (ratePerHour(t + 1_800_000) === peak)
      firstDay = { startsAt: t - (t % day), endsAt: t - (t % day) + day };
  }
  // An instant of the week before the move read as the same hour of the week after it.
  const ahead = (t: number) => ratePerHour(t + week * Math.ceil((movesAt - t) / week));
  return {
    day: firstDay,
    first: firstDay
      ? pickups(ratePerHour, firstDay.startsAt, firstDay.endsAt)
      : { arrivals: 0, p95: Number.NaN },
    oldPeaks: pickups(ratePerHour, movesAt - week, movesAt),
    whileQuiet: pickups(ahead, movesAt - week, movesAt),
  };
}

/** An execution that waited longer than `slowAboveMs` to be claimed, or never was. */
function isSlow(c: ClaimRecord, slowAboveMs: number): boolean {
  return c.claimedAt === null || c.claimedAt - c.arrivedAt > slowAboveMs;
}

const seconds = (ms: number) => (Number.isFinite(ms) ? `${(ms / 1000).toFixed(1)} s` : '-');

export function formatSummary(s: ReplaySummary): string {
  const p = s.pickup;
  return [
    `${s.name}: ${s.executions} executions, ${s.claimed} claimed, ${s.neverClaimed} never claimed`,
    `  pickup p50 ${seconds(p.p50)}, p95 ${seconds(p.p95)}, p99 ${seconds(p.p99)}, max ${seconds(p.max)}, mean ${seconds(p.mean)}`,
    `  ${s.requests} requests, ${s.rateLimited} answered 429, ` +
      (s.exhaustedOnDay === null ? 'the month lasted' : `the month ran out on day ${s.exhaustedOnDay}`),
  ].join('\n');
}
