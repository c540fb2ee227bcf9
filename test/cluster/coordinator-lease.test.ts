// The coordinator lease on a real Redis: one holder at a time, renewed by its holder only, given back on
// release, and taken by another once its holder stops renewing it.
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CoordinatorLease } from '../../src/cluster/coordinator-lease.ts';
import { connectRedis } from '../../src/cluster/redis.ts';
import { clusteredTestsRun, RedisServer } from './redis-server.ts';

describe.runIf(clusteredTestsRun)('CoordinatorLease', () => {
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

  it('has one holder at a time; its release lets the next take it', async () => {
    const a = new CoordinatorLease(redis, 'lease-1', 'a');
    const b = new CoordinatorLease(redis, 'lease-1', 'b');
    expect(await a.tryHold()).toBe(true);
    expect(await b.tryHold()).toBe(false);
    expect(await a.tryHold()).toBe(true);
    expect(await a.holder()).toBe('a');
    await a.release();
    expect(await b.tryHold()).toBe(true);
    expect(await a.tryHold()).toBe(false);
    expect(await b.holder()).toBe('b');
  });

  it('expires when its holder stops renewing it, and the old holder learns it lost it', async () => {
    const a = new CoordinatorLease(redis, 'lease-2', 'a');
    const b = new CoordinatorLease(redis, 'lease-2', 'b');
    expect(await a.tryHold()).toBe(true);
    // As if the TTL had run out while a was stalled.
    await redis.del('lease-2');
    expect(await b.tryHold()).toBe(true);
    expect(await a.tryHold()).toBe(false);
    expect(a.held).toBe(false);
    // a's release must not take b's lease away.
    await a.release();
    expect(await b.holder()).toBe('b');
  });
});
