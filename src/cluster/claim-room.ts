// Room in Redis for the claim a poll may bring, reserved before the poll leaves: a key of CLAIM_ROOM_BYTES the
// coordinator writes first. A Redis that refuses writes (full, with `maxmemory-policy noeviction`) refuses it,
// and no poll leaves. A Redis that fills up while the poll is out refuses the claim's job; deleting the key (a
// write Redis allows when full) frees the room, and the job is added: no claim is held only in memory.
import type { Redis } from 'ioredis';

/**
 * Bytes reserved: far more than other replicas write in the milliseconds between the
 * release and the add (budget slots, heartbeats: about 100 bytes each), and than a claim's job needs.
 */
export const CLAIM_ROOM_BYTES = 64 * 1024;
/** The reservation lapses after this long unless a poll writes it again (a coordinator that died), in ms. */
const CLAIM_ROOM_TTL_MS = 60_000;

export class ClaimRoom {
  readonly #redis: Redis;
  readonly #key: string;
  readonly #padding = 'x'.repeat(CLAIM_ROOM_BYTES);

  /** `key`: this replica's own (one poll at a time, so one reservation each). */
  constructor(redis: Redis, key: string) {
    this.#redis = redis;
    this.#key = key;
  }

  /** Reserves the room; rejects while Redis refuses writes (then no poll may leave). One round trip. */
  async reserve(): Promise<void> {
    await this.#redis.set(this.#key, this.#padding, 'PX', CLAIM_ROOM_TTL_MS);
  }

  /** Frees the room for the claim's job; true when there was room to free. */
  async release(): Promise<boolean> {
    return (await this.#redis.del(this.#key).catch(() => 0)) === 1;
  }
}
