// `df-worker check --online` with DF_REDIS_URL: one connection to Redis (through the sentinels when they are
// set), PING, and what INFO says of its set-up, as lines to print; never throws for what Redis does.
import { Redis, ReplyError } from 'ioredis';
import { redactUrl } from '../secrets/redact.ts';
import { StartupError } from '../daemon/task-list.ts';
import { redisOptions, type RedisSettings } from './redis.ts';
import {
  describeRedisError,
  inspectRedis,
  REDIS_CLUSTER_REFUSED,
  setupProblems,
  type RedisSetup,
} from './redis-health.ts';

export interface RedisProbe {
  /** Lines starting with `redis:`. */
  lines: string[];
  problems: number;
}

export async function probeRedis(settings: RedisSettings): Promise<RedisProbe> {
  const where =
    settings.sentinels === ''
      ? redactUrl(settings.redisUrl)
      : `master ${settings.sentinelMaster} through the sentinels ${settings.sentinels}`;
  let options;
  try {
    // One try, no reconnection: the check says what went wrong and exits.
    options = { ...redisOptions(settings), retryStrategy: () => null, sentinelRetryStrategy: () => null };
  } catch (error) {
    if (error instanceof StartupError) return { lines: [`redis: ${where}: ${error.message}`], problems: 1 };
    throw error;
  }
  const redis = new Redis(options);
  const errors: unknown[] = [];
  redis.on('error', (error) => errors.push(error));
  try {
    await redis.connect();
    await redis.ping();
    const setup = await inspectRedis(redis).catch((error: unknown) => {
      if (error instanceof ReplyError) return undefined;
      throw error;
    });
    return describeSetup(where, setup);
  } catch (error) {
    // What Redis said first (a refused password), rather than the closed connection that followed.
    const said = [...errors, error].map(describeRedisError).find((problem) => !problem.consequence);
    return { lines: [`redis: ${where}: ${(said ?? describeRedisError(error)).message}`], problems: 1 };
  } finally {
    redis.disconnect();
  }
}

function describeSetup(where: string, setup: RedisSetup | undefined): RedisProbe {
  if (setup === undefined) {
    return {
      lines: [`redis: ${where} answered PING (INFO refused: its eviction policy and role are not checked)`],
      problems: 0,
    };
  }
  const problems = setup.clusterEnabled ? [REDIS_CLUSTER_REFUSED] : setupProblems(setup);
  const facts = `Redis ${setup.version ?? '?'}, role ${setup.role ?? '?'}, maxmemory-policy ${setup.evictionPolicy ?? '?'}`;
  return {
    lines: [`redis: ${where} answered PING (${facts})`, ...problems.map((problem) => `redis: ${problem}`)],
    problems: problems.length,
  };
}
