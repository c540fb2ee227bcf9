// Bounds the queue's storage in Redis: completed jobs are removed once COMPLETED_KEEP_MS old and failed ones (dead
// letters) once FAILED_KEEP_MS old. BullMQ's removeOnComplete by age prunes only when a later job completes, so a
// cluster that goes quiet would keep its last hour of jobs for ever; the coordinator prunes on its heartbeat.
import type { Queue } from 'bullmq';
import type { Clock } from '../clock/clock.ts';
import { COMPLETED_KEEP_MS, FAILED_KEEP_MS } from './queue-journal.ts';

/** How often the coordinator prunes, in ms. */
export const PRUNE_EVERY_MS = 60_000;
/** Jobs removed by one call of BullMQ's clean (one Lua script): what a prune removes at most, per state. */
const PRUNE_BATCH = 1_000;

export interface QueuePrunerOptions {
  queue: Queue;
  clock: Clock;
  /** Defaults COMPLETED_KEEP_MS, FAILED_KEEP_MS, PRUNE_EVERY_MS. */
  completedKeepMs?: number;
  failedKeepMs?: number;
  everyMs?: number;
}

export class QueuePruner {
  readonly #o: QueuePrunerOptions;
  #prunedAt = -Infinity;

  constructor(options: QueuePrunerOptions) {
    this.#o = options;
  }

  /** Prunes when the last prune is `everyMs` old; returns how many jobs it removed. Rejects while Redis is away. */
  async maybePrune(): Promise<number> {
    const now = this.#o.clock.monotonic();
    if (now - this.#prunedAt < (this.#o.everyMs ?? PRUNE_EVERY_MS)) return 0;
    this.#prunedAt = now;
    const { queue } = this.#o;
    const completed = await queue.clean(
      this.#o.completedKeepMs ?? COMPLETED_KEEP_MS,
      PRUNE_BATCH,
      'completed',
    );
    const failed = await queue.clean(this.#o.failedKeepMs ?? FAILED_KEEP_MS, PRUNE_BATCH, 'failed');
    return completed.length + failed.length;
  }
}
