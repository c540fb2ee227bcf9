// Replicas' heartbeats on a real Redis: instants on Redis's clock, one process per replica id (a second is
// refused while the first beats, and joins once a dead one's heartbeat lapses), and a clean stop removes only
// the process's own entry.
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectRedis } from '../../src/clustered/redis.ts';
import { REPLICA_TIMEOUT_MS, ReplicaIdInUseError, Replicas } from '../../src/clustered/replicas.ts';
import { clusteredTestsRun, RedisServer } from './redis-server.ts';

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

describe.runIf(clusteredTestsRun)('Replicas', () => {
  let server: RedisServer;
  let redis: Redis;

  beforeAll(async () => {
    server = await RedisServer.start();
    redis = connectRedis(server.url);
    await redis.connect();
  });
  afterAll(async () => {
    redis?.disconnect();
    await server?.dispose();
  });

  /** Redis's clock, in ms. */
  async function redisNow(): Promise<number> {
    const [seconds, micros] = await redis.time();
    return Number(seconds) * 1_000 + Math.floor(Number(micros) / 1_000);
  }

  it("counts replicas alive by Redis's clock and removes the dead ones' entries", async () => {
    const a = new Replicas(redis, 'replicas-1', 'a');
    await a.join(4, { sleep });
    const now = await redisNow();
    // Written by replicas whose heartbeats are 1 s and 7 s old on Redis's clock.
    await redis.hset('replicas-1', 'b', JSON.stringify({ concurrency: 2, seenAt: now - 1_000, token: 't' }));
    await redis.hset('replicas-1', 'c', JSON.stringify({ concurrency: 8, seenAt: now - 7_000, token: 't' }));
    const alive = await a.alive();
    expect([...alive.keys()].sort()).toEqual(['a', 'b']);
    expect(alive.get('a')!.seenAt).toBeGreaterThanOrEqual(now - 1_000);
    expect(await redis.hexists('replicas-1', 'c')).toBe(0);
  });

  it('refuses a second process under a replica id whose heartbeat lives, naming DF_REPLICA_ID', async () => {
    const first = new Replicas(redis, 'replicas-2', 'same-id');
    await first.join(4, { sleep });
    const beating = setInterval(() => void first.beat(4), 300);
    try {
      const second = new Replicas(redis, 'replicas-2', 'same-id');
      const refused = await second.join(4, { sleep }).catch((error: unknown) => error);
      expect(refused).toBeInstanceOf(ReplicaIdInUseError);
      expect((refused as ReplicaIdInUseError).code).toBe('DFW_REPLICA_ID_IN_USE');
      expect((refused as Error).message).toContain('DF_REPLICA_ID=same-id');
      // Its clean stop does not remove the first's entry.
      await second.leave();
      expect(await redis.hexists('replicas-2', 'same-id')).toBe(1);
    } finally {
      clearInterval(beating);
    }
  });

  it("joins once a dead process's heartbeat under its id lapses; the old process then finds its id taken", async () => {
    const dead = new Replicas(redis, 'replicas-3', 'same-id');
    await dead.join(4, { sleep });
    // As if it had beaten 5 s ago (Redis's clock) and died.
    await redis.hset(
      'replicas-3',
      'same-id',
      JSON.stringify({ concurrency: 4, seenAt: (await redisNow()) - 5_000, token: dead.token }),
    );
    const next = new Replicas(redis, 'replicas-3', 'same-id');
    const waits: number[] = [];
    const started = Date.now();
    await next.join(2, { sleep, onWait: (ms) => waits.push(ms) });
    expect(waits).toHaveLength(1);
    expect(Date.now() - started).toBeGreaterThanOrEqual(REPLICA_TIMEOUT_MS - 5_000 - 100);
    expect(await dead.beat(4)).toBe(false);
    expect(await next.beat(2)).toBe(true);
    expect((await next.alive()).get('same-id')).toMatchObject({ concurrency: 2, token: next.token });
  });
});
