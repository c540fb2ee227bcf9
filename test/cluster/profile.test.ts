// What the poll planner learnt of arrivals outlives a coordinator: the holder saves its profile in Redis as its
// term ends, and the replica taking over adopts it, so a rolling restart does not start pacing afresh.
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { clusterKeys } from '../../src/clustered/redis.ts';
import { waitFor } from '../daemon/harness.ts';
import { clusterFixture } from './cluster-rig.ts';
import { clusteredTestsRun } from './redis-server.ts';

describe.runIf(clusteredTestsRun)('the arrival profile in clustered mode', () => {
  const cluster = clusterFixture();

  it('is saved by the coordinator that stops and adopted by the replica that takes over', async () => {
    const rig = await cluster.create({ perSecond: 20, perMinute: 1_200 });
    await rig.start('a');
    await waitFor(() => rig.coordinator() === 'a', 'a coordinates', 15_000);
    rig.enqueue(9);
    await waitFor(() => rig.done(), 'every execution reported', 20_000);
    await rig.start('b');
    await rig.kill('a', 'SIGTERM');

    const client = new Redis(cluster.redis().url);
    try {
      const saved = JSON.parse((await client.get(clusterKeys(rig.apiKey).profile)) ?? 'null') as {
        tasks: Record<string, unknown>;
      } | null;
      expect(Object.keys(saved?.tasks ?? {}).length).toBeGreaterThan(0);
    } finally {
      client.disconnect();
    }
    await waitFor(() => rig.coordinator() === 'b', 'b takes over', 15_000);
    const adopted = rig
      .logsOf('b')
      .find((l) => l.msg === 'adopted the arrival profile the previous coordinators learnt');
    expect(adopted?.tasks).toBeGreaterThan(0);
  }, 60_000);
});
