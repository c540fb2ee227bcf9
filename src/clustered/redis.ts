// Clustered mode's connection to Redis and the names of its keys: every key of one API key shares a hash tag
// (so a Redis Cluster keeps them on one node, as the budget's script needs) named after a hash of the API key,
// never the key itself. Only loaded when DF_REDIS_URL is set.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import type { ConnectionOptions } from 'node:tls';
import { Redis, type RedisOptions } from 'ioredis';
import { backoffDelayMs, DEFAULT_BACKOFF, type BackoffOptions } from '../clock/backoff.ts';
import { redactUrl } from '../secrets/redact.ts';
import { clusterSchema } from '../config/cluster-schema.ts';
import { parseHostPortList } from '../config/formats.ts';
import type { WorkerConfig } from '../config/schema.ts';
import { StartupError } from '../daemon/task-list.ts';

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

/** Longest wait between two reconnection attempts, in ms: Redis coming back is noticed within it. */
export const RECONNECT_MAX_MS = 1_000;

/**
 * Wait before reconnection attempt `times`: the daemon's back-off (DF_RETRY_BASE_MS, jittered), its cap
 * DF_ERROR_BACKOFF_MAX_MS or RECONNECT_MAX_MS, whichever is smaller: an attempt costs the service nothing.
 */
export function reconnectDelayMs(times: number, backoff: BackoffOptions = DEFAULT_BACKOFF): number {
  return backoffDelayMs(times, { ...backoff, maxMs: Math.min(backoff.maxMs, RECONNECT_MAX_MS) });
}

/** Clustered mode's settings: the URL, the sentinels, the TLS files; or a URL alone (the rest their defaults). */
export type RedisSettings = WorkerConfig['cluster'];
export type RedisTarget = RedisSettings | string;

function settingsOf(target: RedisTarget): RedisSettings {
  if (typeof target !== 'string') return target;
  const defaults = Object.fromEntries(
    Object.entries(clusterSchema).map(([name, setting]) => [name, setting.default]),
  ) as RedisSettings;
  return { ...defaults, redisUrl: target };
}

/** The sentinels' usual port, when DF_REDIS_SENTINELS leaves it out. */
export const SENTINEL_PORT = 26_379;

/**
 * Where and how to connect, from the settings: the server of DF_REDIS_URL, or the master the sentinels name;
 * its credentials and database; TLS with the CA and client certificate files for rediss://. Throws a
 * StartupError naming the setting when a TLS file cannot be read.
 */
export function connectionOptions(target: RedisTarget): RedisOptions {
  const settings = settingsOf(target);
  const url = new URL(settings.redisUrl);
  const tls = url.protocol === 'rediss:' ? tlsOptions(settings) : undefined;
  const auth: RedisOptions = {
    ...(url.username ? { username: decodeURIComponent(url.username) } : {}),
    ...(url.password ? { password: decodeURIComponent(url.password) } : {}),
    ...(url.pathname.length > 1 ? { db: Number(url.pathname.slice(1)) } : {}),
  };
  const sentinels = parseHostPortList(settings.sentinels);
  if ('problem' in sentinels || sentinels.length === 0) {
    return { host: url.hostname, port: Number(url.port || 6379), ...auth, ...(tls ? { tls } : {}) };
  }
  return {
    ...auth,
    sentinels: sentinels.map(({ host, port }) => ({ host, port: port ?? SENTINEL_PORT })),
    name: settings.sentinelMaster,
    ...(settings.sentinelPassword === '' ? {} : { sentinelPassword: settings.sentinelPassword }),
    // The same TLS to the sentinels and to the master they name.
    ...(tls ? { tls, sentinelTLS: tls, enableTLSForSentinelMode: true } : {}),
    // Not ioredis's failoverDetector: with it (5.11) a connection ended for good at the promotion. Without it,
    // a connection to the dead master reconnects every RECONNECT_MAX_MS at most and asks the sentinels again.
  };
}

function tlsOptions(settings: RedisSettings): ConnectionOptions {
  const read = (file: string, env: string): Buffer | undefined => {
    if (file === '') return undefined;
    try {
      return readFileSync(file);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? (error as Error).message;
      throw new StartupError(
        `cannot read ${env} ${file} (${code}); check the path and the file's permissions`,
      );
    }
  };
  const ca = read(settings.tlsCaFile, 'DF_REDIS_TLS_CA_FILE');
  const cert = read(settings.tlsCertFile, 'DF_REDIS_TLS_CERT_FILE');
  const key = read(settings.tlsKeyFile, 'DF_REDIS_TLS_KEY_FILE');
  return { ...(ca ? { ca } : {}), ...(cert ? { cert } : {}), ...(key ? { key } : {}) };
}

/** Where Redis is, as it may be logged: the URL with its password masked, and the sentinels if any. */
export function redisForLogs(settings: RedisSettings): Record<string, string> {
  return {
    redis: redactUrl(settings.redisUrl),
    ...(settings.sentinels === ''
      ? {}
      : { sentinels: settings.sentinels, sentinelMaster: settings.sentinelMaster }),
  };
}

/**
 * Options of every connection: bounded connect and command times, and commands refused at once while the
 * connection is down (the callers wait and retry, rather than pile up behind a dead server).
 */
export function redisOptions(settings: RedisTarget, backoff: BackoffOptions = DEFAULT_BACKOFF): RedisOptions {
  return {
    ...connectionOptions(settings),
    connectTimeout: REDIS_CONNECT_TIMEOUT_MS,
    commandTimeout: REDIS_COMMAND_TIMEOUT_MS,
    maxRetriesPerRequest: 1,
    enableOfflineQueue: false,
    // Reconnects for ever.
    retryStrategy: (times) => reconnectDelayMs(times, backoff),
    sentinelRetryStrategy: (times) => reconnectDelayMs(times, backoff),
    lazyConnect: true,
  };
}

/** BullMQ's connections block (BRPOPLPUSH and friends): no command timeout, and retried until Redis answers. */
export function bullConnectionOptions(
  settings: RedisTarget,
  backoff: BackoffOptions = DEFAULT_BACKOFF,
): RedisOptions {
  return {
    ...connectionOptions(settings),
    connectTimeout: REDIS_CONNECT_TIMEOUT_MS,
    maxRetriesPerRequest: null,
    retryStrategy: (times) => reconnectDelayMs(times, backoff),
    sentinelRetryStrategy: (times) => reconnectDelayMs(times, backoff),
  };
}

/** Hears every error a connection meets: its own (refused, TLS, auth) and each command's (OOM, READONLY). */
export type RedisErrorObserver = (error: unknown) => void;

/** A connection whose every failed command is also shown to an observer (the commands' callers still get it). */
class ObservedRedis extends Redis {
  #observe: RedisErrorObserver = () => undefined;

  observe(observer: RedisErrorObserver): this {
    this.#observe = observer;
    return this;
  }

  override sendCommand(...args: Parameters<Redis['sendCommand']>): unknown {
    const [command] = args;
    // ioredis's own CLIENT SETINFO at connect, which Redis before 7.2 refuses and ioredis ignores.
    const setInfo = command.name === 'client' && String(command.args[0]).toLowerCase() === 'setinfo';
    if (!setInfo) command.promise.catch((error: unknown) => this.#observe(error));
    return super.sendCommand(...args);
  }
}

/**
 * A connection (made by `connect()`). Its errors are not events to handle: the commands that meet them fail,
 * and their callers wait and retry, and say so in readiness; ioredis reconnects by itself. `observe` hears
 * each of them (the daemon logs and counts them with what Redis said).
 */
export function connectRedis(
  settings: RedisTarget,
  backoff: BackoffOptions = DEFAULT_BACKOFF,
  observe: RedisErrorObserver = () => undefined,
): Redis {
  const redis = new ObservedRedis(redisOptions(settings, backoff)).observe(observe);
  redis.on('error', observe);
  return redis;
}
