// The month replay's data: arrivals in, claims and requests out. Shared by the replay of df-worker's own
// scheduling code (replay.ts), the fixed-interval pollers it is compared with, the workload generators and
// the charts, so every one of them reads and writes the same lines.

/** One execution becoming pending on the service: a line of the arrivals file. */
export interface Arrival {
  /** The task's key. */
  task: string;
  /** Milliseconds since the epoch. */
  at: number;
}

/** What became of one execution: a line of `claims.jsonl` (instants in ms; null when it never happened). */
export interface ClaimRecord {
  task: string;
  arrivedAt: number;
  claimedAt: number | null;
  reportedAt: number | null;
  /** In a chained month: which custom step of its job run it was (0 for the first). */
  step?: number;
}

/** `list`: the task list; `job-list`: the job executions list (the chained simulation's). */
export type RequestKind = 'poll' | 'report' | 'list' | 'job-list' | 'other';

/** One request that reached the service: a line of `requests.jsonl`. Status 429: refused by a limit. */
export interface RequestRecord {
  at: number;
  kind: RequestKind;
  /** The task's key (polls, and reports of its executions); absent for requests of no one task. */
  task?: string;
  status: number;
}

/** What a month of polling did with its arrivals: df-worker's or a fixed poller's. */
export interface ReplayResult {
  /** Who polled: 'df-worker', or a fixed poller's name such as 'fixed 65 s'. */
  name: string;
  /** The month replayed: [startsAt, endsAt) in ms. */
  startsAt: number;
  endsAt: number;
  claims: ClaimRecord[];
  requests: RequestRecord[];
}

/** The printed summary of one replay. Pickup figures are over claimed executions, in ms. */
export interface ReplaySummary {
  name: string;
  executions: number;
  claimed: number;
  neverClaimed: number;
  pickup: { p50: number; p95: number; p99: number; max: number; mean: number };
  requests: number;
  /** Requests the service refused with 429 (a limit was exceeded). */
  rateLimited: number;
  /** Day of the month (1-based) from which the month's quota was used up, or null when it lasted. */
  exhaustedOnDay: number | null;
  /** The instant of the last poll sent, in ms, or null when none was. */
  lastPollAt: number | null;
}
