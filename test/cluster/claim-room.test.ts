// The room a coordinator reserves in Redis before each poll (ClaimRoom), against a real Redis at its memory
// limit: once the room went to a claim because Redis was full, the room just freed does not let the next poll
// leave; it waits until Redis has room for a whole room beyond what it holds.
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLAIM_ROOM_BYTES, ClaimRoom } from '../../src/clustered/claim-room.ts';
import { systemClock } from '../../src/clock/clock.ts';
import { clusteredTestsRun, RedisServer } from './redis-server.ts';

const KEY = 'df-test:claim-room:replica-a';

describe.runIf(clusteredTestsRun)('the claim room at Redis’s memory limit', () => {
  let server: RedisServer;
  let redis: Redis;
  beforeAll(async () => {
    server = await RedisServer.start();
    redis = new Redis({ host: '127.0.0.1', port: server.port, lazyConnect: true });
    await redis.connect();
    await redis.config('SET', 'maxmemory-policy', 'noeviction');
  });
  afterAll(async () => {
    await redis?.config('SET', 'maxmemory', '0');
    redis?.disconnect();
    await server?.dispose();
  });

  const used = async () => Number(/^used_memory:(\d+)/m.exec(await redis.info('memory'))![1]);

  it('after a room given to a claim, refuses the next until Redis has room for it again', async () => {
    const room = new ClaimRoom(redis, KEY, systemClock);
    await room.reserve();
    expect(await redis.strlen(KEY)).toBe(CLAIM_ROOM_BYTES);

    // Redis full as the claim's job is added: the room goes to it, which puts Redis under its limit again.
    await redis.config('SET', 'maxmemory', String((await used()) - 1_024));
    await expect(redis.set('df-test:job', 'x'.repeat(2_048))).rejects.toThrow(/OOM/);
    expect(await room.release()).toBe(true);
    await redis.set('df-test:job', 'x'.repeat(2_048));
    // A write is admitted now (the limit is above what Redis holds), but a room would not fit under it.
    await redis.set('df-test:slot', '1');
    await expect(room.reserve()).rejects.toThrow(/Redis is full \(\d+ of its maxmemory \d+ bytes used\)/);
    expect(await redis.exists(KEY)).toBe(0);

    // Room again: the next reserve writes it.
    await redis.config('SET', 'maxmemory', String((await used()) + 4 * CLAIM_ROOM_BYTES));
    await room.reserve();
    expect(await redis.strlen(KEY)).toBe(CLAIM_ROOM_BYTES);
  });

  it('without a limit (maxmemory 0) a room given away is written again at once', async () => {
    await redis.config('SET', 'maxmemory', '0');
    const room = new ClaimRoom(redis, `${KEY}-b`, systemClock);
    await room.reserve();
    expect(await room.release()).toBe(true);
    await room.reserve();
    expect(await redis.strlen(`${KEY}-b`)).toBe(CLAIM_ROOM_BYTES);
  });
});
