// Which replicas are alive and how many executions they run at once: each writes a heartbeat (its
// concurrency and the instant) into one hash; one not heard of for REPLICA_TIMEOUT_MS is taken for dead.
import type { Redis } from 'ioredis';

/** How often a replica writes its heartbeat, in ms. */
export const HEARTBEAT_MS = 1_500;
/** A replica not heard of for this long is dead (its entry is removed by the next reader). */
export const REPLICA_TIMEOUT_MS = 6_000;

export interface ReplicaBeat {
  concurrency: number;
  seenAt: number;
}

export class Replicas {
  readonly #redis: Redis;
  readonly #key: string;
  readonly #id: string;

  constructor(redis: Redis, key: string, id: string) {
    this.#redis = redis;
    this.#key = key;
    this.#id = id;
  }

  async beat(concurrency: number, nowMs: number): Promise<void> {
    const beat: ReplicaBeat = { concurrency, seenAt: nowMs };
    await this.#redis.hset(this.#key, this.#id, JSON.stringify(beat));
  }

  /** On a clean stop: the others stop counting this replica's slots at once. */
  async leave(): Promise<void> {
    await this.#redis.hdel(this.#key, this.#id);
  }

  /** The replicas alive at `nowMs`, with their concurrency; removes the dead ones' entries. */
  async alive(nowMs: number): Promise<Map<string, ReplicaBeat>> {
    const all = await this.#redis.hgetall(this.#key);
    const alive = new Map<string, ReplicaBeat>();
    const dead: string[] = [];
    for (const [id, text] of Object.entries(all)) {
      let beat: ReplicaBeat | undefined;
      try {
        beat = JSON.parse(text) as ReplicaBeat;
      } catch {
        beat = undefined;
      }
      if (beat && typeof beat.seenAt === 'number' && nowMs - beat.seenAt < REPLICA_TIMEOUT_MS)
        alive.set(id, beat);
      else dead.push(id);
    }
    if (dead.length > 0) await this.#redis.hdel(this.#key, ...dead);
    return alive;
  }
}
