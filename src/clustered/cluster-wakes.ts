// Wakes that reach the coordinator from any replica. A POST /wake, or the early poll after a refused report
// (the service most likely queued the work again), asked on a replica that does not coordinate would wake no
// poll loop there: it is written to a Redis list (cluster-inbox.ts), which the coordinator takes at each
// heartbeat and wakes those tasks (within HEARTBEAT_MS, 1.5 s).
import type { Redis } from 'ioredis';
import type { Logger } from '../telemetry/logger.ts';
import { ClusterInbox } from './cluster-inbox.ts';

/** Stands for "every task" in the list. */
const EVERY_TASK = '*';

export class ClusterWakes {
  readonly #inbox: ClusterInbox;

  constructor(redis: Redis, key: string, logger: Logger) {
    this.#inbox = new ClusterInbox(redis, key, logger, { one: 'a wake', many: 'wakes' });
  }

  /** Asks the coordinator to poll `taskKey` (every task without) at its next heartbeat. Never rejects. */
  async ask(taskKey?: string): Promise<void> {
    await this.#inbox.put(taskKey ?? EVERY_TASK, { taskKey });
  }

  /** The wakes asked since the last take (undefined: every task), emptying the list. Never rejects. */
  async take(): Promise<(string | undefined)[]> {
    const asked = await this.#inbox.take();
    return [...new Set(asked)].map((task) => (task === EVERY_TASK ? undefined : task));
  }
}
