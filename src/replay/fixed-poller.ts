// The baselines: fixed-interval pollers over the same arrivals and the same service rules (one pending
// execution handed out per poll, oldest first; 5 requests a second, 50 a minute, the month's quota). A
// synchronous event simulation: a month of 40,000 requests takes milliseconds.
import { SERVICE_REQUEST_LIMITS } from '../api/service-limits.ts';
import type { Arrival, ClaimRecord, ReplayResult, RequestRecord } from './types.ts';
import { summarize } from './summary.ts';

export interface FixedPollerOptions {
  /** Each task is polled every `intervalMs` (several tasks: round robin, evenly staggered). */
  intervalMs: number;
  /** Poll the task again at once after each hit, until a poll comes back empty. */
  repollAfterHit?: boolean;
  startsAt: number;
  endsAt: number;
  /** The month's quota; the poller stops when it is used up. Default: the service's (api/service-limits.ts). */
  perMonth?: number;
  /** A hit is reported this long after it, in ms. Default 0. */
  handlerMs?: number;
  /** The interval from a poll due at `t` to the next, where it varies by hour (replaces `intervalMs`). */
  intervalAt?: (t: number) => number;
}

const PER_SECOND = SERVICE_REQUEST_LIMITS.perSecond;
const PER_MINUTE = SERVICE_REQUEST_LIMITS.perMinute;

export function fixedPoller(arrivals: readonly Arrival[], o: FixedPollerOptions): ReplayResult {
  const perMonth = o.perMonth ?? SERVICE_REQUEST_LIMITS.perMonth;
  const handlerMs = o.handlerMs ?? 0;
  const tasks = [...new Set(arrivals.map((a) => a.task))].sort();
  const pending = new Map(tasks.map((t) => [t, [] as ClaimRecord[]]));
  const claims: ClaimRecord[] = [];
  for (const a of [...arrivals].sort((x, y) => x.at - y.at)) {
    if (a.at < o.startsAt || a.at >= o.endsAt) continue;
    const claim: ClaimRecord = { task: a.task, arrivedAt: a.at, claimedAt: null, reportedAt: null };
    claims.push(claim);
    pending.get(a.task)!.push(claim);
  }
  const heads = new Map(tasks.map((t) => [t, 0]));
  const requests: RequestRecord[] = [];
  /** Instants of the last PER_MINUTE requests, for the windows. */
  const recent: number[] = [];
  const sendAt = (t: number): number => {
    let at = t;
    if (recent.length >= PER_SECOND) at = Math.max(at, recent[recent.length - PER_SECOND]! + 1_000);
    if (recent.length >= PER_MINUTE) at = Math.max(at, recent[recent.length - PER_MINUTE]! + 60_000);
    return at;
  };
  const record = (r: RequestRecord) => {
    requests.push(r);
    recent.push(r.at);
    if (recent.length > PER_MINUTE) recent.shift();
  };
  // Reports wait for their handler: kept in time order and sent before any later poll.
  const reports: { at: number; claim: ClaimRecord }[] = [];
  const flushReports = (until: number) => {
    while (reports.length > 0 && reports[0]!.at <= until && requests.length < perMonth) {
      const { at, claim } = reports.shift()!;
      const sent = sendAt(at);
      claim.reportedAt = sent;
      record({ at: sent, kind: 'report', task: claim.task, status: 200 });
    }
  };
  const slotMs = o.intervalMs / Math.max(1, tasks.length);
  let clock = o.startsAt;
  let varied = o.startsAt;
  outer: for (let slot = 0; ; slot++) {
    const due = o.intervalAt ? varied : o.startsAt + slot * slotMs;
    if (o.intervalAt) varied += o.intervalAt(due) / Math.max(1, tasks.length);
    if (due >= o.endsAt) break;
    const task = tasks[slot % tasks.length]!;
    let t = Math.max(due, clock);
    for (;;) {
      flushReports(t);
      if (requests.length >= perMonth) break outer;
      t = sendAt(t);
      if (t >= o.endsAt) break outer;
      const queue = pending.get(task)!;
      const head = heads.get(task)!;
      const claim = head < queue.length && queue[head]!.arrivedAt <= t ? queue[head]! : undefined;
      record({ at: t, kind: 'poll', task, status: claim ? 200 : 404 });
      if (!claim) break;
      heads.set(task, head + 1);
      claim.claimedAt = t;
      reports.push({ at: t + handlerMs, claim });
      if (!o.repollAfterHit) break;
    }
    clock = t;
  }
  flushReports(o.endsAt);
  const name = `fixed ${(o.intervalMs / 1000).toFixed(1)} s${o.repollAfterHit ? ' + re-poll' : ''}`;
  return { name, startsAt: o.startsAt, endsAt: o.endsAt, claims, requests };
}

/**
 * The fixed poller chosen in hindsight: the smallest interval (to 0.1 s) whose month does not run out, or,
 * when every interval runs out (more work than the month can carry), the one that claims the most.
 */
export function bestFixedInHindsight(
  arrivals: readonly Arrival[],
  o: Omit<FixedPollerOptions, 'intervalMs'>,
): ReplayResult {
  const perMonth = o.perMonth ?? SERVICE_REQUEST_LIMITS.perMonth;
  const run = (intervalMs: number) => fixedPoller(arrivals, { ...o, intervalMs });
  const runsOut = (r: ReplayResult) => r.requests.length >= perMonth;
  const longest = run(86_400_000);
  if (runsOut(longest)) {
    let best = longest;
    for (let ms = 1_000; ms <= 3_600_000; ms *= 1.02) {
      const r = run(ms);
      if (summarize(r, perMonth).claimed > summarize(best, perMonth).claimed) best = r;
    }
    return best;
  }
  return run(shortestWithin(run, perMonth, 86_400_000));
}

/** The shortest interval (to 0.1 s, at most `longestMs`) whose month does not run out with `run`. */
function shortestWithin(
  run: (intervalMs: number) => ReplayResult,
  perMonth: number,
  longestMs: number,
): number {
  let low = 100;
  let high = longestMs;
  while (high - low > 100) {
    const mid = (low + high) / 2;
    if (run(mid).requests.length >= perMonth) low = mid;
    else high = mid;
  }
  return high;
}

/** The quiet hours' interval as multiples of the busy hours' (see bestByHourInHindsight). */
const QUIET_FACTORS = [1, 1.5, 2, 2.5, 3, 4, 6, 10, 20];
/** Hours in which no work comes are polled this often (the daemon's default DF_MAX_POLL_INTERVAL_MS). */
const EMPTY_HOUR_MS = 900_000;
const HOUR_MS = 3_600_000;

/**
 * A reference for time-varying work: a poller that knows each hour's rate in advance (`ratePerHour`, read at
 * the middle of the hour) and re-polls after each hit. Hours at or above a rate are busy and polled every T,
 * the other hours with work are quiet and polled every k × T, hours without work every 15 minutes. The rate
 * that splits them, k and T are chosen in hindsight: the smallest p95 pickup among the settings whose month
 * does not run out. A poller that has to learn the hours, and cannot choose its intervals knowing the month's
 * arrivals, is not expected to beat it: it shows how far the p95 of a workload can fall at all.
 */
export function bestByHourInHindsight(
  arrivals: readonly Arrival[],
  ratePerHour: (t: number) => number,
  o: Omit<FixedPollerOptions, 'intervalMs' | 'intervalAt' | 'repollAfterHit'>,
  /** The quiet hours' intervals tried, as multiples of the busy hours'. */
  quietFactors: readonly number[] = QUIET_FACTORS,
): ReplayResult {
  const perMonth = o.perMonth ?? SERVICE_REQUEST_LIMITS.perMonth;
  const rates: number[] = [];
  for (let t = o.startsAt; t < o.endsAt; t += HOUR_MS) rates.push(ratePerHour(t + HOUR_MS / 2));
  const levels = [...new Set(rates.filter((r) => r > 0))].sort((a, b) => b - a);
  let best: { result: ReplayResult; p95: number } | undefined;
  for (const busyFrom of levels) {
    for (const k of levels.some((r) => r < busyFrom) ? quietFactors : [1]) {
      const intervalAt = (busyMs: number) => (t: number) => {
        const rate = rates[Math.floor((t - o.startsAt) / HOUR_MS)] ?? 0;
        if (rate >= busyFrom) return busyMs;
        return rate > 0 ? Math.min(EMPTY_HOUR_MS, k * busyMs) : EMPTY_HOUR_MS;
      };
      const run = (busyMs: number) =>
        fixedPoller(arrivals, {
          ...o,
          intervalMs: busyMs,
          intervalAt: intervalAt(busyMs),
          repollAfterHit: true,
        });
      if (run(EMPTY_HOUR_MS).requests.length >= perMonth) continue;
      const high = shortestWithin(run, perMonth, EMPTY_HOUR_MS);
      const result = run(high);
      const p95 = summarize(result, perMonth).pickup.p95;
      if (!best || p95 < best.p95) {
        const quiet = k === 1 ? '' : ` / ${(Math.min(EMPTY_HOUR_MS, k * high) / 1000).toFixed(1)} s`;
        best = { p95, result: { ...result, name: `by hour: ${(high / 1000).toFixed(1)} s${quiet}` } };
      }
    }
  }
  return best?.result ?? bestFixedInHindsight(arrivals, { ...o, repollAfterHit: true });
}
