// Reports a replica that does not coordinate delivered, of executions of a job's step, passed to the
// coordinator through Redis (cluster-inbox.ts): the coordinator tells each as a `replicaReport` event at its
// next heartbeat (within HEARTBEAT_MS, 1.5 s), so successor pacing there (daemon/successor-listener.ts) sees
// every report of a step, whichever replica ran it, and polls the job's next step around its learnt delay.
import type { Redis } from 'ioredis';
import type { WorkerEvents } from '../events/worker-events.ts';
import type { Logger } from '../telemetry/logger.ts';
import { ClusterInbox } from './cluster-inbox.ts';

interface ReplicaReport {
  task: string;
  executionId: string;
  jobId: string;
}

function parseReport(entry: string): ReplicaReport | undefined {
  try {
    const { task, executionId, jobId } = JSON.parse(entry) as Partial<Record<keyof ReplicaReport, unknown>>;
    if (typeof task === 'string' && typeof executionId === 'string' && typeof jobId === 'string') {
      return { task, executionId, jobId };
    }
  } catch {
    // Not ours (another version's): skipped, as a report not passed.
  }
  return undefined;
}

export class ClusterReports {
  readonly #inbox: ClusterInbox;
  readonly #events: WorkerEvents;
  /** The job of each execution this replica runs (its claim event's), until its report ends. */
  readonly #jobOf = new Map<string, string>();

  constructor(redis: Redis, key: string, logger: Logger, events: WorkerEvents) {
    this.#inbox = new ClusterInbox(redis, key, logger, { one: 'a report', many: 'reports' });
    this.#events = events;
  }

  /** Passes each report of a job's step this replica delivers while `coordinating()` is false. */
  passWhile(coordinating: () => boolean): void {
    this.#events.on('claim', ({ executionId, jobId }) => {
      if (jobId !== undefined) this.#jobOf.set(executionId, jobId);
    });
    this.#events.on('report', ({ task, executionId, result }) => {
      const jobId = this.#jobOf.get(executionId);
      this.#jobOf.delete(executionId);
      if (result !== 'delivered' || jobId === undefined || coordinating()) return;
      void this.#inbox.put(JSON.stringify({ task, executionId, jobId }), { executionId });
    });
  }

  /** On the coordinator, at each heartbeat: tells the reports passed since the last. Never rejects. */
  async tell(): Promise<void> {
    for (const entry of await this.#inbox.take()) {
      const report = parseReport(entry);
      if (report) this.#events.emit('replicaReport', report);
    }
  }
}
