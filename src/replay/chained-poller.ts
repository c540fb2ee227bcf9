// The chained month's pollers in a synchronous event simulation (same service rules as fixed-poller.ts: one
// pending execution per poll, oldest first; 5 a second, 50 a minute, the month's quota; a claim is reported
// at once): a fixed poller, an oracle that knows each step's arrival to the minute, and successor pacing
// (the scheduler's own module) over idle polls of the tasks that can arrive unannounced.
import type { Clock } from '../clock/clock.ts';
import { PipelineModel } from '../scheduler/pipeline-model.ts';
import { SuccessorPacing, type SuccessorPacingOptions } from '../scheduler/successor-pacing.ts';
import { PipelineRuns, type ChainedArrival, type JobsFile } from './jobs.ts';
import type { ClaimRecord, ReplayResult, RequestRecord } from './types.ts';

export type ChainedPolicy =
  | { kind: 'fixed'; intervalMs: number }
  | { kind: 'oracle' }
  | { kind: 'pacing'; idleIntervalMs: number; pacing?: SuccessorPacingOptions };

export interface ChainedOptions {
  startsAt: number;
  endsAt: number;
  /** Default 40,000. */
  perMonth?: number;
}

const PER_SECOND = 5;
const PER_MINUTE = 50;
const MINUTE = 60_000;

/** A month of `file`'s job runs polled by `policy`. Claims carry `step`: which custom step of its job. */
export function chainedPoller(file: JobsFile, policy: ChainedPolicy, o: ChainedOptions): ReplayResult {
  const perMonth = o.perMonth ?? 40_000;
  const runs = new PipelineRuns(file);
  const tasks = [...new Set([...runs.tasks(), ...(file.extraTasks ?? [])])].sort();
  const model = new PipelineModel(file.jobs, tasks);
  let now = o.startsAt;
  const clock: Clock = { now: () => now, sleep: () => Promise.resolve() };
  const pacing = policy.kind === 'pacing' ? new SuccessorPacing(clock, policy.pacing) : undefined;

  const future: ChainedArrival[] = [];
  const pending = new Map(tasks.map((t) => [t, [] as ChainedArrival[]]));
  const claims = new Map<number, ClaimRecord>();
  const schedule = (list: ChainedArrival[]) => {
    for (const a of list) {
      if (a.at >= o.endsAt) continue;
      future.push(a);
      claims.set(a.id, { task: a.task, arrivedAt: a.at, claimedAt: null, reportedAt: null, step: a.order });
    }
  };
  schedule(runs.start());

  // Each task's next idle poll (fixed and pacing), or the oracle's polls.
  const idle = new Map<string, number>();
  if (policy.kind !== 'oracle') {
    const interval = policy.kind === 'fixed' ? policy.intervalMs : policy.idleIntervalMs;
    const idlers = tasks.filter((t) => policy.kind === 'fixed' || model.arrivesUnannounced(t));
    idlers.forEach((t, i) => idle.set(t, o.startsAt + (i * interval) / Math.max(1, idlers.length)));
  }
  const idleMs =
    policy.kind === 'fixed' ? policy.intervalMs : policy.kind === 'pacing' ? policy.idleIntervalMs : 0;
  /** The oracle's polls by task: one at the first whole minute at or after each arrival. */
  const oracle = new Map<string, number[]>();
  /** Polls due at once again after a hit (the re-poll), by task. */
  const again = new Set<string>();

  const requests: RequestRecord[] = [];
  const recent: number[] = [];
  const sendAt = (t: number) => {
    let at = t;
    if (recent.length >= PER_SECOND) at = Math.max(at, recent[recent.length - PER_SECOND]! + 1_000);
    if (recent.length >= PER_MINUTE) at = Math.max(at, recent[recent.length - PER_MINUTE]! + MINUTE);
    return at;
  };
  const record = (r: RequestRecord) => {
    requests.push(r);
    recent.push(r.at);
    if (recent.length > PER_MINUTE) recent.shift();
  };

  const nextPoll = (): { task: string; at: number } | undefined => {
    let best: { task: string; at: number } | undefined;
    const consider = (task: string, at: number | undefined) => {
      if (at !== undefined && (!best || at < best.at)) best = { task, at };
    };
    for (const task of again) consider(task, now);
    for (const [task, at] of idle) consider(task, at);
    if (pacing) for (const task of pacing.awaitedTasks()) consider(task, pacing.nextPollAt(task));
    for (const [task, due] of oracle) consider(task, due[0]);
    return best;
  };

  for (;;) {
    if (requests.length >= perMonth) break;
    const poll = nextPoll();
    let arrivalIndex = -1;
    for (let i = 0; i < future.length; i++) {
      if (arrivalIndex < 0 || future[i]!.at < future[arrivalIndex]!.at) arrivalIndex = i;
    }
    const arrival = arrivalIndex < 0 ? undefined : future[arrivalIndex]!;
    if (arrival && (!poll || arrival.at <= poll.at)) {
      future.splice(arrivalIndex, 1);
      now = Math.max(now, arrival.at);
      pending.get(arrival.task)!.push(arrival);
      if (policy.kind === 'oracle') {
        const due = oracle.get(arrival.task) ?? [];
        due.push(Math.ceil(arrival.at / MINUTE) * MINUTE);
        oracle.set(arrival.task, due);
      }
      continue;
    }
    if (!poll) break;
    const t = sendAt(Math.max(now, poll.at));
    if (t >= o.endsAt) break;
    now = t;
    again.delete(poll.task);
    const queue = pending.get(poll.task)!;
    const hit = queue.shift();
    record({ at: t, kind: 'poll', task: poll.task, status: hit ? 200 : 404 });
    const idleAt = idle.get(poll.task);
    if (idleAt !== undefined && idleAt <= t) {
      idle.set(poll.task, idleAt + idleMs * Math.max(1, Math.ceil((t - idleAt) / idleMs)));
    }
    const due = oracle.get(poll.task);
    if (due && due[0]! <= t) {
      due.shift();
      if (due.length === 0) oracle.delete(poll.task);
    }
    if (hit) {
      const claim = claims.get(hit.id)!;
      claim.claimedAt = t;
      pacing?.arrived(hit.task, hit.at, String(hit.run));
      pacing?.polled(poll.task);
      if (requests.length >= perMonth) break;
      const reportAt = sendAt(t);
      now = reportAt;
      claim.reportedAt = reportAt;
      record({ at: reportAt, kind: 'report', task: hit.task, status: 200 });
      const successor = model.successorOf(hit.job, hit.position);
      if (successor && pacing) pacing.reported(successor, String(hit.run));
      schedule(runs.reported(hit.id, reportAt));
      if (policy.kind !== 'oracle') again.add(poll.task);
    } else {
      pacing?.polled(poll.task);
    }
  }
  const name =
    policy.kind === 'fixed'
      ? `fixed ${(policy.intervalMs / 1000).toFixed(1)} s`
      : policy.kind === 'oracle'
        ? 'oracle (to the minute)'
        : `successor pacing, idle ${(policy.idleIntervalMs / 1000).toFixed(1)} s`;
  return { name, startsAt: o.startsAt, endsAt: o.endsAt, claims: [...claims.values()], requests };
}

/**
 * The shortest interval (to 1 s) with which `policy(interval)` does not run out of the month: the best fixed
 * poller in hindsight (fixed), or the idle pace successor pacing can afford beside its successor polls.
 */
export function shortestInHindsight(
  file: JobsFile,
  policy: (intervalMs: number) => ChainedPolicy,
  o: ChainedOptions,
): ReplayResult {
  const perMonth = o.perMonth ?? 40_000;
  const run = (ms: number) => chainedPoller(file, policy(ms), o);
  let low = 1_000;
  let high = 86_400_000;
  if (run(high).requests.length >= perMonth) return run(high);
  while (high - low > 1_000) {
    const mid = (low + high) / 2;
    if (run(mid).requests.length >= perMonth) low = mid;
    else high = mid;
  }
  return run(Math.round(high));
}
