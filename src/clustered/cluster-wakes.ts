// Wakes that reach the coordinator from any replica. A POST /wake, or the early poll after a refused report
// (the service most likely queued the work again), asked on a replica that does not coordinate would wake no
// poll loop there: it is written to a Redis list, which the coordinator takes at each heartbeat and wakes
// those tasks (within HEARTBEAT_MS, 1.5 s).
import type { Redis } from 'ioredis';
import type { Logger } from '../telemetry/logger.ts';

/** Wakes kept at most (the newest): a replica that asks in a loop cannot grow the list. */
const MAX_WAKES = 100;
/** A wake no coordinator took within this long is dropped (no coordinator: nothing polls anyway). */
const WAKE_TTL_MS = 60_000;
/** Stands for "every task" in the list. */
const EVERY_TASK = '*';

export class ClusterWakes {
  readonly #redis: Redis;
  readonly #key: string;
  readonly #logger: Logger;

  constructor(redis: Redis, key: string, logger: Logger) {
    this.#redis = redis;
    this.#key = key;
    this.#logger = logger;
  }

  /** Asks the coordinator to poll `taskKey` (every task without) at its next heartbeat. Never rejects. */
  async ask(taskKey?: string): Promise<void> {
    try {
      await this.#redis
        .multi()
        .rpush(this.#key, taskKey ?? EVERY_TASK)
        .ltrim(this.#key, -MAX_WAKES, -1)
        .pexpire(this.#key, WAKE_TTL_MS)
        .exec();
    } catch (error) {
      this.#logger.warn({ err: error as Error, taskKey }, 'could not pass a wake to the coordinator');
    }
  }

  /** The wakes asked since the last take (undefined: every task), emptying the list. Never rejects. */
  async take(): Promise<(string | undefined)[]> {
    try {
      const replies = await this.#redis.multi().lrange(this.#key, 0, -1).del(this.#key).exec();
      const asked = (replies?.[0]?.[1] ?? []) as string[];
      return [...new Set(asked)].map((task) => (task === EVERY_TASK ? undefined : task));
    } catch (error) {
      this.#logger.warn({ err: error as Error }, "could not read the other replicas' wakes");
      return [];
    }
  }
}
