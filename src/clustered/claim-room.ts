// Room in Redis for the claim a poll may bring, reserved before the poll leaves: a key of CLAIM_ROOM_BYTES the
// coordinator keeps. A Redis that refuses writes (full, with `maxmemory-policy noeviction`) refuses the budget
// slot every poll takes first (a write), or this key, and no poll leaves. A Redis that fills up while the poll is
// out refuses the claim's job; deleting the key (a write Redis allows when full) frees the room, and the job is
// added: no claim is held only in memory. The room is written again before the next poll.
import type { Redis } from 'ioredis';
import type { Clock } from '../clock/clock.ts';

/**
 * Bytes reserved: far more than other replicas write in the milliseconds between the release and the add
 * (budget slots, heartbeats: about 100 bytes each). Redis admits a write while it is under its limit, however
 * large the write.
 */
export const CLAIM_ROOM_BYTES = 64 * 1024;
/** The room lapses after this long unless written again (a coordinator that died), in ms. */
const CLAIM_ROOM_TTL_MS = 10 * 60_000;
/** A room held is written again once this old, well before it lapses, in ms. */
const CLAIM_ROOM_REFRESH_MS = CLAIM_ROOM_TTL_MS / 2;

export class ClaimRoom {
  readonly #redis: Redis;
  readonly #key: string;
  readonly #clock: Clock;
  readonly #padding = 'x'.repeat(CLAIM_ROOM_BYTES);
  /** Clock instant the room was last written, while held. */
  #reservedAt: number | undefined;

  /** `key`: this replica's own (its coordinator sends one poll at a time, so one room each). */
  constructor(redis: Redis, key: string, clock: Clock) {
    this.#redis = redis;
    this.#key = key;
    this.#clock = clock;
  }

  /**
   * Makes sure the room is held: written when it was given to a claim, or is half its TTL old (one round trip
   * then, none otherwise). Rejects while Redis refuses writes: then no poll may leave.
   */
  async reserve(): Promise<void> {
    const now = this.#clock.monotonic();
    if (this.#reservedAt !== undefined && now - this.#reservedAt < CLAIM_ROOM_REFRESH_MS) return;
    this.#reservedAt = undefined;
    await this.#redis.set(this.#key, this.#padding, 'PX', CLAIM_ROOM_TTL_MS);
    this.#reservedAt = now;
  }

  /** Frees the room for the claim's job; true when there was room to free. */
  async release(): Promise<boolean> {
    this.#reservedAt = undefined;
    return (await this.#redis.del(this.#key).catch(() => 0)) === 1;
  }
}
