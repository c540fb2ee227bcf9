// The coordinator lease (and any such lock): one process at a time holds it (SET NX PX), renews it well within
// its TTL, and gives it back on a clean stop; a process that dies lets it expire, and another takes it at its
// next try. The value is the replica id and a random token of this lease object: two processes given one
// DF_REPLICA_ID never renew each other's lease. The TTL runs on Redis's clock, never a replica's.
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { backoffDelayMs, type BackoffOptions } from '../clock/backoff.ts';
import type { Clock } from '../clock/clock.ts';

/** How long the lease lasts unless renewed, in ms: the longest a dead coordinator holds up polling. */
export const LEASE_TTL_MS = 5_000;
/** How often the holder renews it and the others try to take it, in ms. */
export const LEASE_RENEW_MS = 1_500;

/** Between the replica id and the process's token in the lease's value. */
const TOKEN_SEPARATOR = '/';

// KEYS: lease. ARGV: holder, ttl. Renews only the holder's own lease.
const RENEW_SCRIPT = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
`;
// KEYS: lease. ARGV: holder. Gives back only the holder's own lease.
const RELEASE_SCRIPT = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`;

interface LeaseCommands {
  dfLeaseRenew(key: string, holder: string, ttlMs: number): Promise<number>;
  dfLeaseRelease(key: string, holder: string): Promise<number>;
}

export class CoordinatorLease {
  readonly #redis: Redis & LeaseCommands;
  readonly #key: string;
  readonly #holder: string;
  readonly #ttlMs: number;
  #held = false;

  /** `replicaId` names the holder; `ttlMs`: how long the lease lasts unless renewed; default LEASE_TTL_MS. */
  constructor(redis: Redis, key: string, replicaId: string, ttlMs = LEASE_TTL_MS) {
    const commands = redis as Redis & Partial<LeaseCommands>;
    if (!commands.dfLeaseRenew) {
      redis.defineCommand('dfLeaseRenew', { numberOfKeys: 1, lua: RENEW_SCRIPT });
      redis.defineCommand('dfLeaseRelease', { numberOfKeys: 1, lua: RELEASE_SCRIPT });
    }
    this.#redis = commands as Redis & LeaseCommands;
    this.#key = key;
    this.#holder = `${replicaId}${TOKEN_SEPARATOR}${randomBytes(8).toString('hex')}`;
    this.#ttlMs = ttlMs;
  }

  get held(): boolean {
    return this.#held;
  }

  /** How long the lease lasts unless renewed, in ms. */
  get ttlMs(): number {
    return this.#ttlMs;
  }

  /**
   * Takes the lease when free, or renews it when held: true while this replica holds it. A Redis error counts
   * as a loss (another replica may take it once it expires).
   */
  async tryHold(): Promise<boolean> {
    try {
      if (this.#held) {
        this.#held = (await this.#redis.dfLeaseRenew(this.#key, this.#holder, this.#ttlMs)) === 1;
      } else {
        this.#held = (await this.#redis.set(this.#key, this.#holder, 'PX', this.#ttlMs, 'NX')) === 'OK';
      }
    } catch {
      this.#held = false;
    }
    return this.#held;
  }

  /** The replica id of the process holding the lease now, if any. */
  async holder(): Promise<string | null> {
    const value = await this.#redis.get(this.#key);
    return value === null ? null : value.slice(0, value.lastIndexOf(TOKEN_SEPARATOR));
  }

  async release(): Promise<void> {
    if (!this.#held) return;
    this.#held = false;
    await this.#redis.dfLeaseRelease(this.#key, this.#holder);
  }
}

/**
 * Runs `work` while holding `lock` (taken as soon as it is free; a lock whose holder died lapses after its TTL):
 * two replicas with DF_TASK_SYNC then never both create a task missing from the service.
 */
export async function alone<T>(
  lock: CoordinatorLease,
  clock: Clock,
  backoff: BackoffOptions,
  work: () => Promise<T>,
): Promise<T> {
  for (let attempt = 1; !(await lock.tryHold()); attempt++)
    await clock.sleep(backoffDelayMs(attempt, backoff));
  try {
    return await work();
  } finally {
    await lock.release().catch(() => undefined);
  }
}
