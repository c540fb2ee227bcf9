// Issue 28, bounded storage: a completed job is removed once older than its keep time although no later job
// completes (BullMQ's removeOnComplete by age prunes only on a later completion).
import { Queue, Worker } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { QueuePruner } from '../../src/clustered/queue-pruner.ts';
import { systemClock } from '../../src/clock/clock.ts';
import { waitFor } from '../daemon/harness.ts';
import { clusteredTestsRun, RedisServer } from './redis-server.ts';

describe.runIf(clusteredTestsRun)('QueuePruner', () => {
  let redis: RedisServer;
  beforeAll(async () => {
    redis = await RedisServer.start();
  });
  afterAll(async () => {
    await redis?.dispose();
  });

  it('removes the last completed job once older than its keep time, with no later completion', async () => {
    const connection = { host: '127.0.0.1', port: redis.port };
    const queue = new Queue('pruned', { prefix: 'unit', connection });
    const worker = new Worker('pruned', () => Promise.resolve('done'), {
      prefix: 'unit',
      connection: { ...connection, maxRetriesPerRequest: null },
    });
    try {
      // As the coordinator adds them: kept an hour by age, pruned only when a later job completes.
      await queue.add('execution', {}, { jobId: 'last', removeOnComplete: { age: 3_600 } });
      let completed = 0;
      worker.on('completed', () => completed++);
      await waitFor(() => completed === 1, 'the job to complete');
      const pruner = new QueuePruner({ queue, clock: systemClock, completedKeepMs: 200, everyMs: 0 });
      expect(await pruner.maybePrune()).toBe(0);
      expect(await queue.getJobCounts('completed')).toEqual({ completed: 1 });
      await new Promise((resolve) => setTimeout(resolve, 400));
      expect(await pruner.maybePrune()).toBe(1);
      expect(await queue.getJobCounts('completed')).toEqual({ completed: 0 });
      expect(await queue.getJob('last')).toBeUndefined();
    } finally {
      await worker.close();
      await queue.obliterate({ force: true });
      await queue.close();
    }
  });
});
