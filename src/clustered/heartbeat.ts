// A replica's heartbeat (every HEARTBEAT_MS): says in Redis that it lives and how many handler slots it has, and
// reads back what the cluster looks like (the replicas alive and their slots, the queue's counts, the key's
// windows); the coordinator also prunes the queue's old jobs. Whether it last reached Redis is readiness's.
import type { Queue } from 'bullmq';
import type { Clock } from '../clock/clock.ts';
import type { Logger } from '../telemetry/logger.ts';
import type { QueueCounts } from './cluster-metrics.ts';
import type { ExecutionJobData } from './queue-journal.ts';
import type { QueuePruner } from './queue-pruner.ts';
import { describeRedisError } from './redis-health.ts';
import { HEARTBEAT_MS, type Replicas } from './replicas.ts';
import type { SharedBudget } from './shared-budget.ts';

export interface HeartbeatOptions {
  replicas: Replicas;
  queue: Queue<ExecutionJobData>;
  budget: SharedBudget;
  pruner: QueuePruner;
  /** True while this replica holds the coordinator lease: then it prunes the queue and takes the wakes. */
  coordinating: () => boolean;
  /**
   * What the coordinator does at each heartbeat besides pruning (the other replicas' wakes and reports).
   * Never rejects.
   */
  whileCoordinating?: () => Promise<void>;
  /** This replica's handler slots (DF_CONCURRENCY). */
  concurrency: number;
  clock: Clock;
  logger: Logger;
}

/**
 * Joins the cluster under this replica's id: refused while another's heartbeat under it lives (waits for it to
 * lapse, or `signal`).
 */
export async function joinCluster(
  replicas: Replicas,
  concurrency: number,
  core: { clock: Clock; logger: Logger; pollSignal: AbortSignal },
): Promise<void> {
  await replicas.join(concurrency, {
    sleep: (ms) => core.clock.sleep(ms, core.pollSignal),
    onWait: (heardAgoMs) =>
      core.logger.warn(
        { heardAgoMs },
        'another process has a heartbeat under this DF_REPLICA_ID; waiting for it to lapse',
      ),
  });
}

export class Heartbeat {
  readonly #o: HeartbeatOptions;
  #alive = { count: 0, capacity: 0 };
  #queueCounts: QueueCounts | undefined;
  /** True while another process holds this replica id (this one stood still longer than its heartbeat). */
  #idTaken = false;
  /** Whether the last heartbeat reached Redis; undefined before the first. */
  #ok: boolean | undefined;

  constructor(options: HeartbeatOptions) {
    this.#o = options;
  }

  /** The replicas alive and their handler slots added up, as of the last heartbeat. */
  get alive(): { count: number; capacity: number } {
    return this.#alive;
  }

  /** The queue's counts as of the last heartbeat; undefined before the first. */
  get queueCounts(): QueueCounts | undefined {
    return this.#queueCounts;
  }

  /** Whether the last heartbeat reached Redis; undefined before the first. */
  get ok(): boolean | undefined {
    return this.#ok;
  }

  async beat(): Promise<void> {
    const { replicas, concurrency, logger } = this.#o;
    try {
      const ours = await replicas.beat(concurrency);
      if (!ours && this.#idTaken !== true)
        logger.error(
          { code: 'DFW_REPLICA_ID_IN_USE' },
          'another process took over DF_REPLICA_ID while this one stood still',
        );
      this.#idTaken = !ours;
      const alive = await replicas.alive();
      let capacity = 0;
      for (const beat of alive.values()) capacity += beat.concurrency;
      this.#alive = { count: alive.size, capacity };
      const counts = await this.#o.queue.getJobCounts(
        'waiting',
        'active',
        'delayed',
        'failed',
        'prioritized',
      );
      this.#queueCounts = {
        waiting: (counts.waiting ?? 0) + (counts.prioritized ?? 0),
        active: counts.active ?? 0,
        delayed: counts.delayed ?? 0,
        failed: counts.failed ?? 0,
      };
      await this.#o.budget.refresh();
      if (this.#o.coordinating()) {
        // A failed prune is tried again at the next minute; it says nothing of whether claims may go on.
        await this.#o.pruner.maybePrune().catch((error: unknown) => {
          logger.warn({ err: error as Error }, 'could not remove old jobs from the queue');
        });
        await this.#o.whileCoordinating?.();
      }
      if (this.#ok === false) logger.info('Redis answers again: claiming resumes');
      this.#ok = true;
    } catch (error) {
      if (this.#ok !== false) {
        const { message } = describeRedisError(error);
        logger.error({ err: error as Error }, `${message}: no new claims until it does`);
      }
      this.#ok = false;
    }
  }

  /** Beats every HEARTBEAT_MS until `signal`. */
  async loop(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      await this.#o.clock.sleep(HEARTBEAT_MS, signal).catch(() => undefined);
      if (!signal.aborted) await this.beat();
    }
  }
}
