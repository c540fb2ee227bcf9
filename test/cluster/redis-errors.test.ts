// Redis as operators run it, and what a replica says when it is not what df-worker needs: a refused password,
// a server that evicts keys when full, a Redis Cluster, a full Redis (OOM). Each replica is a real process on
// a real redis-server; the log, /readyz and /metrics must say what Redis said.
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from '../daemon/harness.ts';
import { ClusterRig } from './cluster-rig.ts';
import { clusteredTestsRun, RedisServer, type RedisServerOptions } from './redis-server.ts';

let redis: RedisServer | undefined;
let rig: ClusterRig | undefined;

afterEach(async () => {
  await rig?.dispose();
  await redis?.dispose();
  rig = undefined;
  redis = undefined;
});

async function setUp(options: RedisServerOptions = {}): Promise<ClusterRig> {
  redis = await RedisServer.start(options);
  rig = await ClusterRig.create({ redis, perSecond: 20, perMinute: 600 });
  return rig;
}

/** Log lines of replica `name` whose message contains `text`. */
function logged(name: string, text: string): Record<string, unknown>[] {
  return rig!.logsOf(name).filter((l) => typeof l.msg === 'string' && l.msg.includes(text));
}

async function eventually<T>(read: () => Promise<T>, ok: (value: T) => boolean, what: string): Promise<T> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    const value = await read().catch(() => undefined);
    if (value !== undefined && ok(value)) return value;
    if (Date.now() > deadline)
      throw new Error(`timed out waiting for ${what}; last: ${JSON.stringify(value)}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe.runIf(clusteredTestsRun)('what Redis said reaches the log and /readyz', () => {
  it('a wrong password: WRONGPASS is logged once, naming DF_REDIS_URL, and is the /readyz reason', async () => {
    const rig = await setUp({ args: ['--requirepass', 'right-password'] });
    rig.launch('a', { DF_REDIS_URL: `redis://:wrong-password@127.0.0.1:${redis!.port}` });
    await waitFor(() => logged('a', 'WRONGPASS').length > 0, 'the refusal in the log', 15_000);
    const readiness = await eventually(
      () => rig.readiness('a'),
      (r) => r.reasons.redis !== undefined,
      '/readyz',
    );
    expect(readiness.status).toBe(503);
    expect(readiness.reasons.redis).toMatch(/Redis refused the credentials \(WRONGPASS .*DF_REDIS_URL/);
    // The replica retries every second at most; the refusal is logged once.
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    const lines = logged('a', 'WRONGPASS');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: 50, kind: 'auth' });
    expect(JSON.stringify(rig.logsOf('a'))).not.toContain('wrong-password');
  }, 30_000);

  it('maxmemory-policy allkeys-lru (CONFIG renamed away): /readyz 503 naming the policy and the fix', async () => {
    const rig = await setUp({
      args: ['--maxmemory-policy', 'allkeys-lru', '--rename-command', 'CONFIG', '""'],
    });
    await rig.start('a');
    const readiness = await eventually(
      () => rig.readiness('a'),
      (r) => r.status === 503,
      '/readyz 503',
    );
    expect(readiness.reasons).toEqual({
      redisSetup:
        "Redis's maxmemory-policy is allkeys-lru: when full it would evict the queue's jobs and the budget's windows; set maxmemory-policy noeviction",
    });
    expect(logged('a', 'maxmemory-policy is allkeys-lru')).toHaveLength(1);
  }, 30_000);

  it('a Redis Cluster node: start refuses, saying what to use instead', async () => {
    const rig = await setUp({
      args: ['--cluster-enabled', 'yes', '--cluster-config-file', '{dir}/nodes.conf'],
    });
    const daemon = rig.launch('a');
    const exit = await daemon.exited;
    expect(exit.code).not.toBe(0);
    expect(daemon.stdout() + daemon.stderr()).toContain(
      'names a node of a Redis Cluster (cluster_enabled:1), which df-worker does not support',
    );
    expect(daemon.stdout() + daemon.stderr()).toContain('DF_REDIS_SENTINELS');
  }, 30_000);

  it('Redis full (OOM): counted as kind="oom", logged and given as the /readyz reason; ready again once freed', async () => {
    const rig = await setUp();
    await rig.start('a');
    await eventually(
      () => rig.readiness('a'),
      (r) => r.status === 200,
      '/readyz 200',
    );
    const client = new Redis(redis!.url);
    try {
      // Full: more used than maxmemory allows (the keys stay, under noeviction; writes are refused).
      const used = Number(/used_memory:(\d+)/.exec(await client.info('memory'))![1]);
      await client.config('SET', 'maxmemory', String(Math.floor(used / 2)));
      await expect(client.set('one-more', 'x')).rejects.toThrow(/^OOM command not allowed/);
      const readiness = await eventually(
        () => rig.readiness('a'),
        (r) => r.status === 503,
        '/readyz 503',
      );
      expect(readiness.reasons.redis).toMatch(
        // Redis's own words, with the script's name where a script met it (the heartbeat's, on Redis's TIME).
        /^Redis is full and refuses writes \(OOM command not allowed when used memory > 'maxmemory'\.[^)]*\); raise its maxmemory or free memory: no new claims$/,
      );
      expect(await rig.metrics('a')).toMatch(/^dfworker_redis_errors_total\{kind="oom"\} [1-9]\d*$/m);
      expect(logged('a', 'Redis is full and refuses writes (OOM command not allowed')).not.toHaveLength(0);
      // Nothing says only that Redis does not answer: what it said goes with it.
      for (const line of logged('a', 'Redis does not answer')) expect(JSON.stringify(line)).toContain('OOM');
      await client.config('SET', 'maxmemory', '0');
      await eventually(
        () => rig.readiness('a'),
        (r) => r.status === 200,
        '/readyz 200 again',
      );
    } finally {
      client.disconnect();
    }
  }, 40_000);
});
