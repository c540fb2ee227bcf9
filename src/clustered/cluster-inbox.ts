// A Redis list any replica writes to and the coordinator empties at each heartbeat (HEARTBEAT_MS, 1.5 s): how
// what a replica that does not coordinate learns reaches the one that polls (cluster-wakes.ts: wakes asked
// there; cluster-reports.ts: reports delivered there). Bounded and short-lived: a replica that writes in a
// loop cannot grow it, and what no coordinator took is dropped (no coordinator: nothing polls anyway).
import type { Redis } from 'ioredis';
import type { Logger } from '../telemetry/logger.ts';

/** Entries kept at most (the newest). */
const MAX_ENTRIES = 100;
/** An entry no coordinator took within this long is dropped. */
const ENTRY_TTL_MS = 60_000;

export class ClusterInbox {
  readonly #redis: Redis;
  readonly #key: string;
  readonly #logger: Logger;
  /** What the log lines call an entry and the entries ("a wake", "wakes"). */
  readonly #names: { one: string; many: string };

  constructor(redis: Redis, key: string, logger: Logger, names: { one: string; many: string }) {
    this.#redis = redis;
    this.#key = key;
    this.#logger = logger;
    this.#names = names;
  }

  /** Adds `entry` for the coordinator's next heartbeat. Never rejects (a failure is logged). */
  async put(entry: string, fields: object = {}): Promise<void> {
    try {
      await this.#redis
        .multi()
        .rpush(this.#key, entry)
        .ltrim(this.#key, -MAX_ENTRIES, -1)
        .pexpire(this.#key, ENTRY_TTL_MS)
        .exec();
    } catch (error) {
      this.#logger.warn(
        { err: error as Error, ...fields },
        `could not pass ${this.#names.one} to the coordinator`,
      );
    }
  }

  /** The entries put since the last take, oldest first, emptying the list. Never rejects (then none). */
  async take(): Promise<string[]> {
    try {
      const replies = await this.#redis.multi().lrange(this.#key, 0, -1).del(this.#key).exec();
      return (replies?.[0]?.[1] ?? []) as string[];
    } catch (error) {
      this.#logger.warn({ err: error as Error }, `could not read the other replicas' ${this.#names.many}`);
      return [];
    }
  }
}
