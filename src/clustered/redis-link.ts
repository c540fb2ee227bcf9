// A replica's connection to Redis as readiness sees it: waits for Redis at start (a replica started while Redis is
// away waits for it, unready), reads Redis's set-up from INFO at each (re)connection and now and then, and says
// in /readyz what Redis last said rather than only that it fails.
import { ReplyError, type Redis } from 'ioredis';
import type { BackoffOptions } from '../clock/backoff.ts';
import type { Clock } from '../clock/clock.ts';
import type { WorkerConfig } from '../config/schema.ts';
import type { EventSink } from '../events/worker-events.ts';
import type { Readiness } from '../daemon/contract.ts';
import { StartupError } from '../daemon/task-list.ts';
import type { Logger } from '../telemetry/logger.ts';
import { connectRedis } from './redis.ts';
import {
  inspectRedis,
  REDIS_CLUSTER_REFUSED,
  RedisHealth,
  setupProblems,
  type RedisSetup,
} from './redis-health.ts';

/** Redis's set-up (eviction policy, role) is read again when readiness is asked this long after, in ms. */
const REINSPECT_MS = 30_000;

export class RedisLink {
  readonly redis: Redis;
  readonly health: RedisHealth;
  readonly #logger: Logger;
  readonly #clock: Clock;
  /** What INFO said of Redis's set-up at the last look, and when (ms); undefined when INFO was refused. */
  #setup: { at: number; setup: RedisSetup | undefined } | undefined;

  constructor(
    config: WorkerConfig,
    backoff: BackoffOptions,
    core: { logger: Logger; clock: Clock; events: Pick<EventSink, 'emit'> },
  ) {
    this.#logger = core.logger;
    this.#clock = core.clock;
    this.health = new RedisHealth(core.logger, core.events);
    this.redis = connectRedis(config.cluster, backoff, (error) => this.health.observe(error));
  }

  /** Waits until Redis answers, or `signal`; refuses a Redis in cluster mode (StartupError). */
  async connected(signal: AbortSignal): Promise<void> {
    const redis = this.redis;
    if (signal.aborted) return;
    const ready = new Promise<void>((resolve) => {
      const done = () => {
        redis.off('ready', done);
        signal.removeEventListener('abort', done);
        resolve();
      };
      redis.on('ready', done);
      signal.addEventListener('abort', done);
    });
    // The error itself (refused password, untrusted certificate...) is logged as it is met (RedisHealth).
    const warn = () =>
      this.#logger.warn({ reason: this.health.last?.message }, 'Redis does not answer yet; waiting for it');
    redis.once('reconnecting', warn);
    redis.connect().catch(() => undefined);
    if (redis.status !== 'ready') await ready;
    redis.off('reconnecting', warn);
    if (signal.aborted) return;
    const setup = await this.#inspect();
    if (setup?.clusterEnabled === true) throw new StartupError(REDIS_CLUSTER_REFUSED);
    // After a reconnection (a failover, a restart) the server may be another one: its set-up is read again.
    redis.on('ready', () => void this.#inspect());
  }

  /** The checks of /readyz: Redis answers (and `othersOk`: the heartbeat, the budget reach it); its set-up. */
  checks(othersOk: boolean): Readiness['checks'] {
    const redisOk = this.redis.status === 'ready' && othersOk;
    // What Redis last said (OOM, a refused password...) rather than only that it fails.
    const said = this.health.last?.message ?? 'Redis does not answer';
    const problems = this.#setup?.setup === undefined ? [] : setupProblems(this.#setup.setup);
    if (this.redis.status === 'ready' && this.#clock.monotonic() - (this.#setup?.at ?? 0) > REINSPECT_MS)
      void this.#inspect();
    return {
      redis: redisOk ? { ok: true } : { ok: false, reason: `${said}: no new claims` },
      redisSetup: problems.length === 0 ? { ok: true } : { ok: false, reason: problems.join('; ') },
    };
  }

  /** Reads Redis's set-up from INFO, logs each problem once, and keeps it for readiness. */
  async #inspect(): Promise<RedisSetup | undefined> {
    const logger = this.#logger;
    const health = this.health;
    this.#setup = { at: this.#clock.monotonic(), setup: this.#setup?.setup };
    let setup: RedisSetup | undefined;
    try {
      setup = await inspectRedis(this.redis);
    } catch (error) {
      // Not an answer (the connection dropped): what was known stands, and the next look tries again.
      if (!(error instanceof ReplyError)) {
        this.#setup = { at: 0, setup: this.#setup.setup };
        return this.#setup.setup;
      }
      const message = `Redis refused INFO (${(error as Error).message}): its eviction policy and role are not checked`;
      health.once(message, () => logger.warn(message));
    }
    this.#setup = { at: this.#clock.monotonic(), setup };
    for (const problem of setup === undefined ? [] : setupProblems(setup))
      health.once(problem, () => logger.error(problem));
    return setup;
  }
}
