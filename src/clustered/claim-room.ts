// Room in Redis for the claim a poll may bring, reserved before the poll leaves: a key of CLAIM_ROOM_BYTES the
// coordinator keeps. A Redis that refuses writes (full, with `maxmemory-policy noeviction`) refuses the budget
// slot every poll takes first (a write), or this key, and no poll leaves. A Redis that fills up while the poll is
// out refuses the claim's job; deleting the key (a write Redis allows when full) frees the room, and the job is
// added: no claim is held only in memory. The room is written again before the next poll, once Redis has room
// for it beyond what it holds: the room just freed puts a full Redis under its limit, and a write under the limit
// is admitted however large, so without that check the next poll would leave on that freed room, and each claim
// after it would take some of it, until a job no longer fits.
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
  /** The room went to a claim because Redis refused its job: Redis was full then. */
  #given = false;

  /** `key`: this replica's own (its coordinator sends one poll at a time, so one room each). */
  constructor(redis: Redis, key: string, clock: Clock) {
    this.#redis = redis;
    this.#key = key;
    this.#clock = clock;
  }

  /**
   * Makes sure the room is held: written when it was given to a claim, or is half its TTL old (one round trip
   * then, none otherwise; after a room given to a claim, one more to read Redis's memory). Rejects while Redis
   * refuses writes, or, after it was full, until it has room for the room beyond what it holds: then no poll
   * may leave.
   */
  async reserve(): Promise<void> {
    const now = this.#clock.monotonic();
    if (this.#reservedAt !== undefined && now - this.#reservedAt < CLAIM_ROOM_REFRESH_MS) return;
    this.#reservedAt = undefined;
    if (this.#given) await this.#checkHeadroom();
    await this.#redis.set(this.#key, this.#padding, 'PX', CLAIM_ROOM_TTL_MS);
    this.#reservedAt = now;
    this.#given = false;
  }

  /** Frees the room for the claim's job; true when there was room to free. */
  async release(): Promise<boolean> {
    this.#reservedAt = undefined;
    this.#given = true;
    return (await this.#redis.del(this.#key).catch(() => 0)) === 1;
  }

  async #checkHeadroom(): Promise<void> {
    const memory = await this.#redis.info('memory');
    const figure = (name: string) => Number(new RegExp(`^${name}:(\\d+)`, 'm').exec(memory)?.[1] ?? 0);
    const used = figure('used_memory');
    const limit = figure('maxmemory');
    if (limit > 0 && used + CLAIM_ROOM_BYTES > limit) {
      throw new Error(
        `Redis is full (${used} of its maxmemory ${limit} bytes used): no poll until it has room for one ` +
          `more claim (${CLAIM_ROOM_BYTES} bytes); raise maxmemory or free memory`,
      );
    }
  }
}
