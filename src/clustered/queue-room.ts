// Room in the cluster for the next claim: the executions queued or running in the queue, as of the last look,
// against the handler slots of the live replicas. The coordinator claims one execution at a time and only while
// there is room, so the queue never holds more than the cluster runs at once; its scheduler counts its slots
// (and a task's own limit) from here (SlotView).
import type { Queue } from 'bullmq';
import type { Clock } from '../clock/clock.ts';
import type { SlotView } from '../scheduler/scheduler.ts';
import type { ExecutionJobData } from './queue-journal.ts';

/** Wait between two looks at the queue while the cluster's handler slots are all taken, in ms. */
const ROOM_CHECK_MS = 200;

export class QueueRoom {
  readonly #queue: Queue<ExecutionJobData>;
  readonly #clock: Clock;
  readonly #capacity: () => number;
  /** The queue as last looked at: executions waiting or running, in all and by task id. */
  #queued = { total: 0, byTask: new Map<string, number>() };
  /** True while a look at the queue for a task held back is under way or waiting its turn. */
  #watchingHeldBack = false;

  /** `capacity`: executions the live replicas run at once, added up (from their heartbeats). */
  constructor(queue: Queue<ExecutionJobData>, clock: Clock, capacity: () => number) {
    this.#queue = queue;
    this.#clock = clock;
    this.#capacity = capacity;
  }

  /** The cluster's slots as the scheduler counts them: the queue's executions against the replicas' slots. */
  slotView(): SlotView {
    return {
      busy: this.#queued.total,
      concurrency: this.#capacity(),
      held: (taskId) => this.#queued.byTask.get(taskId) ?? 0,
    };
  }

  /**
   * A task was held back for want of a slot: the queue is looked at again every ROOM_CHECK_MS until a look
   * lets the scheduler decide anew (`recheck`; one look at a time, and none while no task is held back).
   */
  watchHeldBack(stop: AbortSignal, recheck: () => void): void {
    if (this.#watchingHeldBack || stop.aborted) return;
    this.#watchingHeldBack = true;
    void this.#clock
      .sleep(ROOM_CHECK_MS, stop)
      .then(() => this.#look())
      .catch(() => undefined)
      .finally(() => {
        this.#watchingHeldBack = false;
        recheck();
      });
  }

  /** Resolves once the queue holds fewer executions than the live replicas run at once (or on `stop`). */
  async wait(stop: AbortSignal): Promise<void> {
    while (!stop.aborted) {
      try {
        const queued = await this.#look();
        if (queued < this.#capacity()) return;
      } catch {
        // Redis away: no new claim until it is back.
      }
      await this.#clock.sleep(ROOM_CHECK_MS, stop).catch(() => undefined);
    }
  }

  /** Reads the executions queued or running (bounded by the cluster's capacity: see wait()). */
  async #look(): Promise<number> {
    const jobs = await this.#queue.getJobs(['waiting', 'active', 'prioritized']);
    const byTask = new Map<string, number>();
    let total = 0;
    for (const job of jobs as Array<{ data?: Partial<ExecutionJobData> } | undefined>) {
      // A job removed between the listing and its read comes back empty.
      if (job === undefined || job === null) continue;
      total++;
      const taskId = job.data?.taskId;
      if (taskId !== undefined) byTask.set(taskId, (byTask.get(taskId) ?? 0) + 1);
    }
    this.#queued = { total, byTask };
    return total;
  }
}
