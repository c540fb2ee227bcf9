// Fencing of a replica's reports: before each report leaves, one script checks that the job's lock in Redis still
// holds this replica's token and extends it. A replica that stalled (SIGSTOP, a paused VM) or was cut from Redis
// longer than the lock lost it, and another replica may be running the execution again: it drops its outcome.
// Such a run is recorded on the job as survived, so the poison-execution limit counts only runs that died.
import type { Job } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Clock } from '../clock/clock.ts';

/** Field of a job's hash: runs of it that lost their lock while their replica lived (stalls, partitions). */
const SURVIVED_FIELD = 'dfStallsSurvived';

/**
 * How long a replica taking up a job waits for the replica it took it from to say it lived, before it counts
 * that run as a crash that decides the poison-execution limit, in ms. A stall shorter than about this plus the
 * lock (5 s) is not a crash; a replica that died makes the poison verdict wait this long.
 */
export const STALL_GRACE_MS = 20_000;

/** Between two reads of a job's survived runs while a poison verdict waits, in ms. */
const SURVIVED_RECHECK_MS = 500;

// KEYS: lock, job. ARGV: token, lock ms. 1 (and the lock extended) while the token holds the lock; otherwise 0,
// and the run is counted as survived on the job while the job exists.
const FENCE_SCRIPT = `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if redis.call('EXISTS', KEYS[2]) == 1 then redis.call('HINCRBY', KEYS[2], '${SURVIVED_FIELD}', 1) end
return 0
`;
// KEYS: job. Counts a run as survived while the job exists (never creates the hash again).
const SURVIVED_SCRIPT = `
if redis.call('EXISTS', KEYS[1]) == 1 then return redis.call('HINCRBY', KEYS[1], '${SURVIVED_FIELD}', 1) end
return 0
`;

interface FenceCommands {
  dfJobFence(lockKey: string, jobKey: string, token: string, lockMs: number): Promise<number>;
  dfJobSurvived(jobKey: string): Promise<number>;
}

export interface JobFenceOptions {
  redis: Redis;
  /** The queue's keys' prefix and name (BullMQ: `<prefix>:<queue>:<jobId>` is a job's hash). */
  prefix: string;
  queue: string;
  /** How long a check extends the lock, in ms (the queue worker's lockDuration). */
  lockMs: number;
  clock: Clock;
}

export class JobFence {
  readonly #o: JobFenceOptions;
  readonly #redis: Redis & FenceCommands;
  /** Jobs whose run here lost its lock, already counted as survived (once per run). */
  readonly #lost = new Set<string>();

  constructor(options: JobFenceOptions) {
    this.#o = options;
    const commands = options.redis as Redis & Partial<FenceCommands>;
    if (!commands.dfJobFence) {
      options.redis.defineCommand('dfJobFence', { numberOfKeys: 2, lua: FENCE_SCRIPT });
      options.redis.defineCommand('dfJobSurvived', { numberOfKeys: 1, lua: SURVIVED_SCRIPT });
    }
    this.#redis = commands as Redis & FenceCommands;
  }

  #jobKey(jobId: string): string {
    return `${this.#o.prefix}:${this.#o.queue}:${jobId}`;
  }

  /** True while this process holds `job`'s lock (extended by the check); one round trip. */
  async owns(job: Job): Promise<boolean> {
    const id = job.id!;
    if (this.#lost.has(id)) return false;
    const key = this.#jobKey(id);
    const held = (await this.#redis.dfJobFence(`${key}:lock`, key, job.token ?? '', this.#o.lockMs)) === 1;
    if (!held) this.#lost.add(id);
    return held;
  }

  /** The queue worker could not renew these jobs' locks: their runs here lost them, and this process lives. */
  async lockLost(jobIds: readonly string[]): Promise<void> {
    for (const id of jobIds) {
      if (this.#lost.has(id)) continue;
      this.#lost.add(id);
      await this.#redis.dfJobSurvived(this.#jobKey(id));
    }
  }

  /** The run of `jobId` here ended: a later run here starts with a lock of its own. */
  forget(jobId: string): void {
    this.#lost.delete(jobId);
  }

  /**
   * Runs of `job` that died with their replica: those that lost their lock (BullMQ's stalled counter) less those
   * whose replica said it lived. When that reaches `limit` (a poison verdict), the replica the job was taken from
   * gets STALL_GRACE_MS to say so (it does within a lock renewal of waking up). Rejects while Redis is away.
   */
  async crashes(job: Job, limit: number, signal?: AbortSignal): Promise<number> {
    const stalled = job.stalledCounter;
    if (stalled === 0) return 0;
    const key = this.#jobKey(job.id!);
    const count = async () => stalled - Number((await this.#redis.hget(key, SURVIVED_FIELD)) ?? 0);
    let crashes = await count();
    const deadline = this.#o.clock.monotonic() + STALL_GRACE_MS;
    while (crashes >= limit && this.#o.clock.monotonic() < deadline && !signal?.aborted) {
      await this.#o.clock.sleep(SURVIVED_RECHECK_MS, signal).catch(() => undefined);
      crashes = await count();
    }
    return Math.max(0, crashes);
  }
}
