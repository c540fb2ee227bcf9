// The cluster's BullMQ queue of claimed executions: the Queue the coordinator adds claims to, and this replica's
// worker of it, which runs each job's execution through the pipeline (execution-processor.ts) under a lock it
// renews, so that a replica killed mid-handler has its execution taken up again by another.
import { Queue, Worker as QueueWorker, type Processor } from 'bullmq';
import { backoffDelayMs, type BackoffOptions } from '../clock/backoff.ts';
import type { WorkerConfig } from '../config/schema.ts';
import type { Logger } from '../telemetry/logger.ts';
import type { JobFence } from './job-fence.ts';
import type { ExecutionJobData } from './queue-journal.ts';
import { bullConnectionOptions, REDIS_COMMAND_TIMEOUT_MS, type ClusterKeys } from './redis.ts';

/**
 * A job's lock lasts this long unless its replica renews it (every half of it): a replica killed mid-handler
 * has its execution taken up again by another within about this time plus STALLED_CHECK_MS.
 */
export const LOCK_DURATION_MS = 5_000;
export const STALLED_CHECK_MS = 2_000;
/**
 * Lock losses BullMQ tolerates before it fails a job by itself. Stalls are not crashes (the pipeline's poison
 * limit counts the runs that died, see JobFence), so this is only a bound on a job that stalls for ever.
 */
const MAX_STALLS = 1_000;

/** The queue the coordinator adds claims to: adds fail at once while Redis is away (it retries them itself). */
export function claimQueue(
  config: WorkerConfig,
  keys: ClusterKeys,
  backoff: BackoffOptions,
): Queue<ExecutionJobData> {
  const queue = new Queue<ExecutionJobData>(keys.queue, {
    prefix: keys.prefix,
    connection: {
      ...bullConnectionOptions(config.cluster, backoff),
      maxRetriesPerRequest: 1,
      enableOfflineQueue: false,
      commandTimeout: REDIS_COMMAND_TIMEOUT_MS,
    },
  });
  queue.on('error', () => undefined);
  return queue;
}

/** This replica's worker of the queue: DF_CONCURRENCY jobs at once, each through `processor`. */
export function queueWorker(options: {
  config: WorkerConfig;
  keys: ClusterKeys;
  backoff: BackoffOptions;
  processor: Processor<ExecutionJobData>;
  fence: JobFence;
  logger: Logger;
}): QueueWorker<ExecutionJobData> {
  const { config, keys, backoff, fence, logger } = options;
  const worker = new QueueWorker<ExecutionJobData>(keys.queue, options.processor, {
    prefix: keys.prefix,
    connection: bullConnectionOptions(config.cluster, backoff),
    concurrency: config.concurrency,
    lockDuration: LOCK_DURATION_MS,
    stalledInterval: STALLED_CHECK_MS,
    // The pipeline fails a poison execution itself, as standalone does, once it has died that many times.
    maxStalledCount: MAX_STALLS,
    // A report not delivered before its replica stopped is retried at the daemon's back-off.
    settings: { backoffStrategy: (attemptsMade) => backoffDelayMs(attemptsMade, backoff) },
  });
  worker.on('error', (error) => logger.debug({ err: error }, 'queue worker error'));
  // This replica lives, yet lost these jobs' locks (a stall, a partition): not crashes of their executions.
  worker.on('lockRenewalFailed', (jobIds) => {
    logger.warn(
      { jobIds },
      'lost the lock of running jobs: another replica may run them; no report from here',
    );
    fence.lockLost(jobIds).catch(() => undefined);
  });
  return worker;
}
