// Which job of the cluster's queue holds each execution's latest claim: a key per execution naming its job, so
// that the coordinator tells an execution the service hands out again while a replica still runs it (or has not
// reported it yet) from one handed out again after its report. Job ids alone cannot: each claim is its own job.
import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type { ExecutionJobData } from './queue-journal.ts';
import { FAILED_KEEP_MS } from './queue-journal.ts';

/** Job states in which the execution is still owed a report: waiting, running, or waiting to retry one. */
const UNFINISHED: ReadonlySet<string> = new Set([
  'waiting',
  'active',
  'delayed',
  'prioritized',
  'waiting-children',
]);

export class ClaimIndex {
  readonly #redis: Redis;
  readonly #queue: Pick<Queue<ExecutionJobData>, 'getJobState'>;
  readonly #prefix: string;

  /** `prefix`: the cluster's key prefix (one API key's keys; see clusterKeys). */
  constructor(redis: Redis, queue: Pick<Queue<ExecutionJobData>, 'getJobState'>, prefix: string) {
    this.#redis = redis;
    this.#queue = queue;
    this.#prefix = prefix;
  }

  /**
   * The id of the job of an earlier claim of the execution that is not finished, if any. A finished job (its
   * report accepted, or refused for good, even while its state is still being set: see releaseClaim) or one
   * pruned from the queue is no claim in hand: undefined.
   */
  async unfinished(executionId: string): Promise<string | undefined> {
    const jobId = await this.#redis.get(this.#key(executionId));
    if (jobId === null) return undefined;
    const state = await this.#queue.getJobState(jobId);
    return UNFINISHED.has(state) ? jobId : undefined;
  }

  /** Names `jobId` as the execution's latest claim; lapses when a failed job would be pruned. */
  async note(executionId: string, jobId: string): Promise<void> {
    await this.#redis.set(this.#key(executionId), jobId, 'PX', FAILED_KEEP_MS);
  }

  #key(executionId: string): string {
    return claimKey(this.#prefix, executionId);
  }
}

/** Deletes the key when it still names ARGV[1]: a later claim's job, noted since, stays named. */
const RELEASE_SCRIPT =
  "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";

/**
 * Stops naming `jobId` as the execution's claim in hand, once the service took its report or refused it for
 * good: the job is finished in all but its state, which BullMQ sets when its processor returns. A claim of the
 * execution from now on is a new one (handed out again after its report, or queued again after a lapsed claim):
 * the coordinator queues it instead of taking it for a redelivery the job in hand answers.
 */
export async function releaseClaim(
  redis: Redis,
  prefix: string,
  executionId: string,
  jobId: string,
): Promise<void> {
  await redis.eval(RELEASE_SCRIPT, 1, claimKey(prefix, executionId), jobId);
}

function claimKey(prefix: string, executionId: string): string {
  return `${prefix}:claim-of:${executionId}`;
}
