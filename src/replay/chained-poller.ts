// The chained month's pollers in a synchronous event simulation (same service rules as fixed-poller.ts: one
// pending execution per poll, oldest first; 5 a second, 50 a minute, the month's quota; a claim is reported
// at once): a fixed poller, an oracle that knows each step's arrival to the minute, and successor pacing
// (the scheduler's own module) over idle polls of the tasks that can arrive unannounced.
import { SERVICE_REQUEST_LIMITS } from '../api/service-limits.ts';
import type { Clock } from '../clock/clock.ts';
import { PipelineModel } from '../scheduler/pipeline-model.ts';
import { SuccessorPacing, type SuccessorPacingOptions } from '../scheduler/successor-pacing.ts';
import { PipelineRuns, type ChainedArrival, type JobsFile } from './jobs.ts';
import type { ClaimRecord, ReplayResult, RequestRecord } from './types.ts';

export type ChainedPolicy =
  | { kind: 'fixed'; intervalMs: number }
  | { kind: 'oracle' }
  | {
      kind: 'pacing';
      /** Idle polls of each task that is some job's first custom step. */
      idleIntervalMs: number;
      /** Idle polls of each task that is in no job (it should not arrive at all). Default 24 h. */
      orphanIntervalMs?: number;
      /**
       * Idle polls of each task of a job that gets none otherwise (a later step only, or every first step
       * while listing): the last resort when a wait passed its window unarrived. Default 6 h.
       */
      fallbackIntervalMs?: number;
      /**
       * A job-executions list request this often stands in for the first steps' idle polls: each run it
       * shows as started is awaited as if its start were a report (pair: start → first custom step).
       */
      listIntervalMs?: number;
      pacing?: SuccessorPacingOptions;
    };

export interface ChainedOptions {
  startsAt: number;
  endsAt: number;
  /** Default: the service's (api/service-limits.ts). */
  perMonth?: number;
}

const PER_SECOND = SERVICE_REQUEST_LIMITS.perSecond;
const PER_MINUTE = SERVICE_REQUEST_LIMITS.perMinute;
const MINUTE = 60_000;

/** A month of `file`'s job runs polled by `policy`. Claims carry `step`: which custom step of its job. */
export function chainedPoller(file: JobsFile, policy: ChainedPolicy, o: ChainedOptions): ReplayResult {
  const perMonth = o.perMonth ?? SERVICE_REQUEST_LIMITS.perMonth;
  const runs = new PipelineRuns(file);
  const tasks = [...new Set([...runs.tasks(), ...(file.extraTasks ?? [])])].sort();
  const model = new PipelineModel(file.jobs, tasks);
  let now = o.startsAt;
  const clock: Clock = { now: () => now, monotonic: () => now, sleep: () => Promise.resolve() };
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

  // Each task's next idle poll and its interval (fixed and pacing); the oracle has none.
  const idle = new Map<string, number>();
  const idleEvery = new Map<string, number>();
  const stagger = (group: string[], interval: number) =>
    group.forEach((t, i) => {
      idle.set(t, o.startsAt + (i * interval) / Math.max(1, group.length));
      idleEvery.set(t, interval);
    });
  if (policy.kind === 'fixed') stagger(tasks, policy.intervalMs);
  if (policy.kind === 'pacing') {
    const listing = policy.listIntervalMs !== undefined;
    const idles = (t: string) => model.arrivesUnannounced(t) && !listing;
    stagger(
      tasks.filter((t) => model.inAnyJob(t) && idles(t)),
      policy.idleIntervalMs,
    );
    stagger(
      tasks.filter((t) => model.inAnyJob(t) && !idles(t)),
      policy.fallbackIntervalMs ?? 21_600_000,
    );
    stagger(
      tasks.filter((t) => !model.inAnyJob(t)),
      policy.orphanIntervalMs ?? 86_400_000,
    );
  }
  const firstSteps = new Map(
    file.jobs.map((job) => [job.key, job.tasks.findIndex((step) => step.type === 'SUB_WORKFLOW')] as const),
  );
  const listEvery = policy.kind === 'pacing' ? policy.listIntervalMs : undefined;
  let nextListAt = listEvery === undefined ? Infinity : o.startsAt;
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
    const polled = nextPoll();
    const poll =
      nextListAt !== Infinity && (!polled || nextListAt < polled.at) ? { task: '', at: nextListAt } : polled;
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
    if (poll.task === '') {
      // The list shows each run that started since the last: its first custom step is awaited from then.
      record({ at: t, kind: 'job-list', status: 200 });
      nextListAt = t + listEvery!;
      for (const start of pacing ? runs.startedUntil(t) : []) {
        const job = file.jobs.find((j) => j.key === start.job)!;
        const first = firstSteps.get(start.job) ?? -1;
        const task = first < 0 ? undefined : job.tasks[first]!.name.split('/').pop();
        if (task === undefined) continue;
        now = start.at;
        pacing!.reported(
          { job: start.job, from: -1, to: first, task, builtInsBetween: first },
          String(start.run),
        );
        now = t;
      }
      continue;
    }
    again.delete(poll.task);
    const queue = pending.get(poll.task)!;
    const hit = queue.shift();
    record({ at: t, kind: 'poll', task: poll.task, status: hit ? 200 : 404 });
    const idleAt = idle.get(poll.task);
    const every = idleEvery.get(poll.task) ?? 0;
    if (idleAt !== undefined && idleAt <= t) {
      idle.set(poll.task, idleAt + every * Math.max(1, Math.ceil((t - idleAt) / every)));
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
  const perMonth = o.perMonth ?? SERVICE_REQUEST_LIMITS.perMonth;
  const run = (ms: number) => chainedPoller(file, policy(ms), o);
  let low = 1_000;
  let high = 86_400_000;
  if (run(high).requests.length >= perMonth) return run(high);
  while (high - low > 1_000) {
    const mid = Math.round((low + high) / 2);
    if (run(mid).requests.length >= perMonth) low = mid;
    else high = mid;
  }
  // Requests do not fall strictly with the interval on a chained month (arrivals follow the pickups): make
  // sure the one returned lasts.
  let result = run(high);
  while (result.requests.length >= perMonth) result = run((high += 1_000));
  return result;
}
