// What Redis said, in words an operator acts on: each error a connection meets is sorted by kind (auth, TLS,
// OOM...) for the log (once per distinct error), /readyz and dfworker_redis_errors_total; and the server's own
// set-up (cluster mode, eviction policy, role) is read from INFO, which unlike CONFIG is never disabled.
import type { Redis } from 'ioredis';
import type { EventSink } from '../events/worker-events.ts';
import type { Logger } from '../telemetry/logger.ts';

export const REDIS_ERROR_KINDS = [
  'auth',
  'tls',
  'oom',
  'readonly',
  'unreachable',
  'timeout',
  'other',
] as const;
export type RedisErrorKind = (typeof REDIS_ERROR_KINDS)[number];

export interface RedisProblem {
  kind: RedisErrorKind;
  /** What happened with what Redis (or the network) said, and what to do. */
  message: string;
  /**
   * A command refused by the client because the connection is down: a consequence of an error already met
   * (refused password, closed socket), which it must not hide.
   */
  consequence?: true;
}

const CONSEQUENCES = /Stream isn't writeable|Connection is closed/;

const UNREACHABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ETIMEDOUT',
  'EPIPE',
]);

/** Sorts an error of ioredis (a ReplyError carries Redis's own words) and says what to do about it. */
export function describeRedisError(error: unknown): RedisProblem {
  const { message, code } = (error ?? {}) as { message?: unknown; code?: unknown };
  const said = typeof message === 'string' ? message : String(error);
  const errorCode = typeof code === 'string' ? code : '';
  if (/^(WRONGPASS|NOAUTH)\b|invalid password|without any password configured/i.test(said)) {
    return {
      kind: 'auth',
      message: `Redis refused the credentials (${said}); check the user and password in DF_REDIS_URL`,
    };
  }
  if (/^NOPERM\b/.test(said)) {
    return {
      kind: 'auth',
      message: `Redis refused a command to this user (${said}); give the user of DF_REDIS_URL every command on the keys df-worker:*`,
    };
  }
  if (/^OOM\b/.test(said)) {
    return {
      kind: 'oom',
      message: `Redis is full and refuses writes (${said}); raise its maxmemory or free memory`,
    };
  }
  if (/^READONLY\b/.test(said)) {
    return {
      kind: 'readonly',
      message: `Redis is a read-only replica (${said}); point DF_REDIS_URL at the master, or use DF_REDIS_SENTINELS`,
    };
  }
  if (/CERT|SSL|TLS/.test(errorCode) || /certificate|ssl routines|tls/i.test(said)) {
    return {
      kind: 'tls',
      message: `the TLS connection to Redis failed (${said}${errorCode === '' ? '' : `, ${errorCode}`}); give the authority that signs Redis's certificate in DF_REDIS_TLS_CA_FILE, and check the host name in DF_REDIS_URL is one the certificate names`,
    };
  }
  if (/timed out/i.test(said)) return { kind: 'timeout', message: `Redis did not answer in time (${said})` };
  if (CONSEQUENCES.test(said)) {
    return { kind: 'unreachable', message: `Redis does not answer (${said})`, consequence: true };
  }
  if (UNREACHABLE_CODES.has(errorCode) || /sentinels are unreachable|connect E/i.test(said)) {
    return { kind: 'unreachable', message: `Redis does not answer (${said})` };
  }
  return { kind: 'other', message: `Redis answered an error (${said})` };
}

/** A distinct error is logged again after this long, in ms, if it is still met. */
export const RELOG_AFTER_MS = 300_000;

/** The errors met on the daemon's connections: logged once per distinct error, counted, the last one kept. */
export class RedisHealth {
  readonly #logger: Logger;
  readonly #events: Pick<EventSink, 'emit'> | undefined;
  readonly #now: () => number;
  readonly #logged = new Map<string, number>();
  #last: RedisProblem | undefined;

  /** `events`: where each error met is told (`redisError`, by kind). Default: none. */
  constructor(logger: Logger, events?: Pick<EventSink, 'emit'>, now = Date.now) {
    this.#logger = logger;
    this.#events = events;
    this.#now = now;
  }

  /** The last error met, as an operator should read it. */
  get last(): RedisProblem | undefined {
    return this.#last;
  }

  observe(error: unknown): RedisProblem {
    const problem = describeRedisError(error);
    this.#events?.emit('redisError', { kind: problem.kind });
    if (problem.consequence && this.#last !== undefined) return problem;
    this.#last = problem;
    this.once(problem.message, () => this.#logger.error({ kind: problem.kind }, problem.message));
    return problem;
  }

  /** Runs `log` unless `message` was logged in the last RELOG_AFTER_MS. */
  once(message: string, log: () => void): void {
    const now = this.#now();
    const at = this.#logged.get(message);
    if (at !== undefined && now - at < RELOG_AFTER_MS) return;
    this.#logged.set(message, now);
    log();
  }
}

/** What INFO says of the server's set-up; a field is undefined when INFO does not give it. */
export interface RedisSetup {
  clusterEnabled: boolean;
  /** master or slave. */
  role: string | undefined;
  /** noeviction, allkeys-lru... */
  evictionPolicy: string | undefined;
  version: string | undefined;
}

export async function inspectRedis(redis: Redis): Promise<RedisSetup> {
  const fields = new Map<string, string>();
  for (const line of (await redis.info()).split(/\r?\n/)) {
    const colon = line.indexOf(':');
    if (colon > 0 && !line.startsWith('#')) fields.set(line.slice(0, colon), line.slice(colon + 1).trim());
  }
  return {
    clusterEnabled: fields.get('cluster_enabled') === '1',
    role: fields.get('role'),
    evictionPolicy: fields.get('maxmemory_policy'),
    version: fields.get('redis_version'),
  };
}

/** Why the server, as set up, cannot keep clustered mode's data; empty when it can. */
export function setupProblems(setup: RedisSetup): string[] {
  const problems: string[] = [];
  if (setup.evictionPolicy !== undefined && setup.evictionPolicy !== 'noeviction') {
    problems.push(
      `Redis's maxmemory-policy is ${setup.evictionPolicy}: when full it would evict the queue's jobs and the budget's windows; set maxmemory-policy noeviction`,
    );
  }
  if (setup.role !== undefined && setup.role !== 'master') {
    problems.push(
      `Redis is a replica (role ${setup.role}), which refuses writes; point DF_REDIS_URL at the master, or use DF_REDIS_SENTINELS`,
    );
  }
  return problems;
}

/** Clustered mode refuses a Redis Cluster: this says why and what to use. */
export const REDIS_CLUSTER_REFUSED =
  'DF_REDIS_URL names a node of a Redis Cluster (cluster_enabled:1), which df-worker does not support: its queue ' +
  '(BullMQ) and budget scripts need one Redis. Use a standalone Redis (with a replica and Redis Sentinel for ' +
  'failover: DF_REDIS_SENTINELS), or a managed Redis with cluster mode disabled';
