// Clustered mode's connection to Redis and the names of its keys: every key of one API key shares a hash tag
// (so a Redis Cluster keeps them on one node, as the budget's script needs) named after a hash of the API key,
// never the key itself. Only loaded when DF_REDIS_URL is set.
import { createHash } from 'node:crypto';
import { hostname } from 'node:os';
import { Redis, type RedisOptions } from 'ioredis';
import { backoffDelayMs, DEFAULT_BACKOFF, type BackoffOptions } from '../clock/backoff.ts';
import { redactUrl } from '../config/describe.ts';
import type { WorkerConfig } from '../config/schema.ts';

/** Timeouts of every Redis command: a Redis that does not answer holds nothing up for long. */
export const REDIS_CONNECT_TIMEOUT_MS = 5_000;
export const REDIS_COMMAND_TIMEOUT_MS = 3_000;

/** The names of one API key's keys in Redis, and of its BullMQ queue. */
export interface ClusterKeys {
  /** BullMQ's prefix of the queue's keys. */
  prefix: string;
  /** BullMQ queue name (no colon allowed). */
  queue: string;
  /** Sorted set of the sends of the last minute (score: send instant in ms). */
  sends: string;
  /** Hash of the month's request counts, by month key (`YYYY-MM`). */
  month: string;
  /** The instant (ms) until which a 429 paused every request of the key. */
  pause: string;
  /** The coordinator lease: holds the holder's replica id, with a TTL. */
  lease: string;
  /** Hash of the replicas seen: id → JSON { seenAt, concurrency }. */
  replicas: string;
  /** Held while a replica reads the task list with DF_TASK_SYNC (and may create tasks). */
  taskSync: string;
  /** What the coordinators learnt of arrivals (the poll planner's profile), as JSON. */
  profile: string;
}

export function clusterKeys(apiKey: string): ClusterKeys {
  const tag = createHash('sha256').update(apiKey).digest('hex').slice(0, 16);
  const base = `df-worker:{${tag}}`;
  return {
    prefix: base,
    queue: 'executions',
    sends: `${base}:budget:sends`,
    month: `${base}:budget:month`,
    pause: `${base}:budget:pause`,
    lease: `${base}:coordinator`,
    replicas: `${base}:replicas`,
    taskSync: `${base}:task-sync`,
    profile: `${base}:arrival-profile`,
  };
}

export function replicaIdFromConfig(config: WorkerConfig): string {
  return config.cluster.replicaId || `${hostname()}-${process.pid}`;
}

/** The URL as it may be logged: its password masked. */
export function redisUrlForLogs(url: string): string {
  return redactUrl(url);
}

/** Longest wait between two reconnection attempts, in ms: Redis coming back is noticed within it. */
export const RECONNECT_MAX_MS = 1_000;

/**
 * Wait before reconnection attempt `times`: the daemon's back-off (DF_RETRY_BASE_MS, jittered), its cap
 * DF_ERROR_BACKOFF_MAX_MS or RECONNECT_MAX_MS, whichever is smaller: an attempt costs the service nothing.
 */
export function reconnectDelayMs(times: number, backoff: BackoffOptions = DEFAULT_BACKOFF): number {
  return backoffDelayMs(times, { ...backoff, maxMs: Math.min(backoff.maxMs, RECONNECT_MAX_MS) });
}

/**
 * Options of every connection: bounded connect and command times, and commands refused at once while the
 * connection is down (the callers wait and retry, rather than pile up behind a dead server).
 */
export function redisOptions(backoff: BackoffOptions = DEFAULT_BACKOFF): RedisOptions {
  return {
    connectTimeout: REDIS_CONNECT_TIMEOUT_MS,
    commandTimeout: REDIS_COMMAND_TIMEOUT_MS,
    maxRetriesPerRequest: 1,
    enableOfflineQueue: false,
    // Reconnects for ever.
    retryStrategy: (times) => reconnectDelayMs(times, backoff),
    lazyConnect: true,
  };
}

/** BullMQ's connections block (BRPOPLPUSH and friends): no command timeout, and retried until Redis answers. */
export function bullConnectionOptions(url: string, backoff: BackoffOptions = DEFAULT_BACKOFF): RedisOptions {
  const parsed = new URL(url);
  return {
    host: parsed.hostname,
    port: Number(parsed.port || 6379),
    ...(parsed.username ? { username: decodeURIComponent(parsed.username) } : {}),
    ...(parsed.password ? { password: decodeURIComponent(parsed.password) } : {}),
    ...(parsed.pathname.length > 1 ? { db: Number(parsed.pathname.slice(1)) } : {}),
    ...(parsed.protocol === 'rediss:' ? { tls: {} } : {}),
    connectTimeout: REDIS_CONNECT_TIMEOUT_MS,
    maxRetriesPerRequest: null,
    retryStrategy: (times) => reconnectDelayMs(times, backoff),
  };
}

/**
 * A connection (made by `connect()`). Its errors are not events to handle: the commands that meet them fail,
 * and their callers wait and retry, and say so in readiness; ioredis reconnects by itself.
 */
export function connectRedis(url: string, backoff: BackoffOptions = DEFAULT_BACKOFF): Redis {
  const redis = new Redis(url, redisOptions(backoff));
  redis.on('error', () => undefined);
  return redis;
}
