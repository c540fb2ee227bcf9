// Which replicas are alive and how many executions they run at once: each writes a heartbeat (its
// concurrency, its process's token and Redis's time) into one hash; one not heard of for REPLICA_TIMEOUT_MS of
// Redis's clock is taken for dead. Every instant compared is Redis's, so replicas' clocks need not agree.
//
// A replica id (DF_REPLICA_ID) belongs to one process at a time: a process starting under an id whose
// heartbeat another process still writes is refused (ReplicaIdInUseError), and a process that finds its id
// taken over while it stood still (a stall longer than REPLICA_TIMEOUT_MS) leaves the entry to the new owner.
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { ErrorCode } from '../errors/catalogue.ts';

/** How often a replica writes its heartbeat, in ms. */
export const HEARTBEAT_MS = 1_500;
/** A replica not heard of for this long (Redis's clock) is dead; its entry is removed by the next reader. */
export const REPLICA_TIMEOUT_MS = 6_000;

export interface ReplicaBeat {
  concurrency: number;
  /** Redis's clock (ms) when the heartbeat was written. */
  seenAt: number;
  /** The writing process's own random token: two processes given one DF_REPLICA_ID differ by it. */
  token?: string;
}

/** Another live process runs under this replica's DF_REPLICA_ID. */
export class ReplicaIdInUseError extends Error {
  readonly code: ErrorCode = 'DFW_REPLICA_ID_IN_USE';
  readonly replicaId: string;

  constructor(replicaId: string, heardAgoMs: number) {
    super(
      `another df-worker process runs as DF_REPLICA_ID=${replicaId} (its heartbeat is ${Math.round(heardAgoMs)} ms ` +
        `old in Redis); give each replica its own DF_REPLICA_ID (or leave it unset), or wait ` +
        `${Math.ceil(REPLICA_TIMEOUT_MS / 1000)} s after the other one stopped`,
    );
    this.name = 'ReplicaIdInUseError';
    this.replicaId = replicaId;
  }
}

// Redis's clock in ms (TIME: seconds and microseconds).
const REDIS_NOW = `
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
`;

// KEYS: replicas. ARGV: id, token, concurrency, timeoutMs. Writes the heartbeat unless another process's
// heartbeat under the same id is alive. Returns { 1 | 0 (refused), ms since the other's heartbeat }.
const BEAT_SCRIPT = `${REDIS_NOW}
local text = redis.call('HGET', KEYS[1], ARGV[1])
if text then
  local ok, beat = pcall(cjson.decode, text)
  if ok and type(beat) == 'table' and beat.token ~= ARGV[2] and type(beat.seenAt) == 'number'
    and now - beat.seenAt < tonumber(ARGV[4]) then
    return {0, now - beat.seenAt}
  end
end
redis.call('HSET', KEYS[1], ARGV[1], cjson.encode({concurrency = tonumber(ARGV[3]), seenAt = now, token = ARGV[2]}))
return {1, 0}
`;

// KEYS: replicas. ARGV: timeoutMs. Removes the dead replicas' entries; returns the live ones (id, text, ...).
const ALIVE_SCRIPT = `${REDIS_NOW}
local all = redis.call('HGETALL', KEYS[1])
local alive = {}
for i = 1, #all, 2 do
  local ok, beat = pcall(cjson.decode, all[i + 1])
  if ok and type(beat) == 'table' and type(beat.seenAt) == 'number' and now - beat.seenAt < tonumber(ARGV[1]) then
    alive[#alive + 1] = all[i]
    alive[#alive + 1] = all[i + 1]
  else
    redis.call('HDEL', KEYS[1], all[i])
  end
end
return alive
`;

// KEYS: replicas. ARGV: id, token. Removes the entry only while it is this process's.
const LEAVE_SCRIPT = `
local text = redis.call('HGET', KEYS[1], ARGV[1])
if not text then return 0 end
local ok, beat = pcall(cjson.decode, text)
if ok and type(beat) == 'table' and beat.token ~= ARGV[2] then return 0 end
return redis.call('HDEL', KEYS[1], ARGV[1])
`;

/** How often a starting replica looks again at the heartbeat under its id, in ms (below HEARTBEAT_MS). */
const JOIN_RECHECK_MS = 500;

export interface JoinOptions {
  /** Waits `ms` (the daemon's clock). */
  sleep: (ms: number) => Promise<void>;
  /** Called once when another process's heartbeat is found under this id, with its age in ms. */
  onWait?: (heardAgoMs: number) => void;
}

interface ReplicaCommands {
  dfReplicaBeat(
    key: string,
    id: string,
    token: string,
    concurrency: number,
    timeoutMs: number,
  ): Promise<[number, number]>;
  dfReplicaAlive(key: string, timeoutMs: number): Promise<string[]>;
  dfReplicaLeave(key: string, id: string, token: string): Promise<number>;
}

export class Replicas {
  readonly #redis: Redis & ReplicaCommands;
  readonly #key: string;
  readonly #id: string;
  /** This process's token: its heartbeat and only its own. */
  readonly token = randomBytes(8).toString('hex');

  constructor(redis: Redis, key: string, id: string) {
    const commands = redis as Redis & Partial<ReplicaCommands>;
    if (!commands.dfReplicaBeat) {
      redis.defineCommand('dfReplicaBeat', { numberOfKeys: 1, lua: BEAT_SCRIPT });
      redis.defineCommand('dfReplicaAlive', { numberOfKeys: 1, lua: ALIVE_SCRIPT });
      redis.defineCommand('dfReplicaLeave', { numberOfKeys: 1, lua: LEAVE_SCRIPT });
    }
    this.#redis = commands as Redis & ReplicaCommands;
    this.#key = key;
    this.#id = id;
  }

  /**
   * The first heartbeat. Under an id another process's heartbeat still holds, waits for that heartbeat to
   * lapse (a process killed without leaving, whose container restarts under the same name, lets go within
   * REPLICA_TIMEOUT_MS), and throws ReplicaIdInUseError as soon as the other writes a new one (it is alive).
   */
  async join(concurrency: number, options: JoinOptions): Promise<void> {
    let heardBefore = Infinity;
    for (;;) {
      const [written, heardAgoMs] = await this.#beat(concurrency);
      if (written === 1) return;
      if (heardAgoMs < heardBefore && heardBefore !== Infinity)
        throw new ReplicaIdInUseError(this.#id, heardAgoMs);
      if (heardBefore === Infinity) options.onWait?.(heardAgoMs);
      heardBefore = heardAgoMs;
      await options.sleep(Math.max(1, Math.min(JOIN_RECHECK_MS, REPLICA_TIMEOUT_MS - heardAgoMs)));
    }
  }

  /**
   * Writes this replica's heartbeat. False when another process took this id over (this one stood still
   * longer than REPLICA_TIMEOUT_MS): its entry is left to that process.
   */
  async beat(concurrency: number): Promise<boolean> {
    const [written] = await this.#beat(concurrency);
    return written === 1;
  }

  /** On a clean stop: the others stop counting this replica's slots at once (only this process's entry). */
  async leave(): Promise<void> {
    await this.#redis.dfReplicaLeave(this.#key, this.#id, this.token);
  }

  /** The replicas alive now (Redis's clock), with their concurrency; removes the dead ones' entries. */
  async alive(): Promise<Map<string, ReplicaBeat>> {
    const flat = await this.#redis.dfReplicaAlive(this.#key, REPLICA_TIMEOUT_MS);
    const alive = new Map<string, ReplicaBeat>();
    for (let i = 0; i + 1 < flat.length; i += 2) alive.set(flat[i]!, JSON.parse(flat[i + 1]!) as ReplicaBeat);
    return alive;
  }

  #beat(concurrency: number): Promise<[number, number]> {
    return this.#redis.dfReplicaBeat(this.#key, this.#id, this.token, concurrency, REPLICA_TIMEOUT_MS);
  }
}
