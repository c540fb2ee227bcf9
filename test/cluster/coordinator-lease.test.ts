// The coordinator lease on a real Redis: one holder at a time, renewed by its holder only, given back on
// release, and taken by another once its holder stops renewing it.
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CoordinatorLease } from '../../src/clustered/coordinator-lease.ts';
import { connectRedis } from '../../src/clustered/redis.ts';
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

  it("is held per process: two holders given one replica id never renew the other's lease", async () => {
    const first = new CoordinatorLease(redis, 'lease-3', 'same-id');
    const second = new CoordinatorLease(redis, 'lease-3', 'same-id');
    expect(await first.tryHold()).toBe(true);
    expect(await second.tryHold()).toBe(false);
    // first stood still past the TTL; second took the lease.
    await redis.del('lease-3');
    expect(await second.tryHold()).toBe(true);
    expect(await first.tryHold()).toBe(false);
    expect(await second.tryHold()).toBe(true);
    expect(await first.holder()).toBe('same-id');
    await first.release();
    expect(await second.tryHold()).toBe(true);
  });
});
