// Issue 28, one replica cut from Redis (a TCP proxy that holds every byte, as a partition does) longer than a
// job's lock (5 s): another replica runs its executions again. Healed, the cut replica must report nothing it no
// longer owns: its report is fenced by a check of the job's lock right before it leaves.
import { describe, expect, it } from 'vitest';
import { waitFor } from '../daemon/harness.ts';
import { clusterFixture } from './cluster-rig.ts';
import { clusteredTestsRun } from './redis-server.ts';
import { TcpProxy } from './tcp-proxy.ts';

/** Longer than the lock (5 s) and the stalled check (2 s) with room for a busy machine; the 30 s, shrunk. */
const CUT_MS = 12_000;
const EXECUTIONS = 18;

describe.runIf(clusteredTestsRun)('a replica cut from Redis', () => {
  const cluster = clusterFixture();

  it('cut 12 s mid-handler, then healed: each execution reported once, at most 5/s, no 429', async () => {
    const rig = await cluster.create({ perSecond: 5, perMinute: 300, concurrency: 2 });
    const proxy = new TcpProxy(cluster.redis().port);
    const port = await proxy.listen();
    try {
      await Promise.all(['a', 'b'].map((name) => rig.start(name)));
      await waitFor(() => rig.coordinator() !== undefined, 'a coordinator', 10_000);
      await rig.start('c', { DF_REDIS_URL: `redis://127.0.0.1:${port}` });
      rig.enqueue(EXECUTIONS, (n) => ({ n, ms: 2_000 }));
      await waitFor(() => rig.runningOn('c').length > 0, 'a handler running on c', 20_000);
      proxy.cut();
      const cutOff = rig.runningOn('c');
      await new Promise((resolve) => setTimeout(resolve, CUT_MS));
      proxy.heal();
      await waitFor(() => rig.done(), 'every execution reported', 40_000);
      // Healed, c meets each execution it ran before the cut: it drops it, or (before the fence) reports it.
      const settled = (id: string) =>
        rig.emulator.execution(id)!.reports.length > 1 ||
        rig.logsOf('c').some((l) => l.executionId === id && /no longer owns/.test(l.msg as string));
      await waitFor(() => cutOff.every(settled), 'c to settle what it ran', 15_000).catch(() => undefined);
      const figures = rig.figures();
      const dropped = rig.logsOf('c').filter((l) => /no longer owns/.test(l.msg as string)).length;
      console.log(
        `c cut from Redis ${CUT_MS} ms with ${cutOff.length} running: ${JSON.stringify(figures)}; ` +
          `outcomes c dropped ${dropped}`,
      );
      expect(figures).toMatchObject({
        claimed: EXECUTIONS,
        reported: EXECUTIONS,
        duplicated: 0,
        lost: 0,
        rateLimited: 0,
      });
      expect(figures.maxPerSecond).toBeLessThanOrEqual(5);
    } finally {
      await proxy.close();
    }
  }, 90_000);
});
