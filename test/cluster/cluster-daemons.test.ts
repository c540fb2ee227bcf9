// Three real `df-worker start` processes in clustered mode on one emulator key and one redis-server. The limits
// are raised (emulator and daemons alike) so that 300 executions fit in seconds; the test checks the emulator's
// own count of every window against them.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../daemon/harness.ts';
import { ClusterRig } from './cluster-rig.ts';
import { clusteredTestsRun, RedisServer } from './redis-server.ts';

const PER_SECOND = 40;
const PER_MINUTE = 2_400;

describe.runIf(clusteredTestsRun)('three replicas on one key (real processes, real Redis)', () => {
  let redis: RedisServer;
  let rig: ClusterRig | undefined;

  beforeAll(async () => {
    redis = await RedisServer.start();
  });
  afterEach(async () => {
    await rig?.dispose();
    rig = undefined;
  });
  afterAll(async () => {
    await redis?.dispose();
  });

  it('300 executions across 3 tasks: each reported once, no 429, within the windows, on every replica', async () => {
    rig = await ClusterRig.create({ redis, perSecond: PER_SECOND, perMinute: PER_MINUTE });
    await Promise.all(['a', 'b', 'c'].map((name) => rig!.start(name)));
    const started = Date.now();
    rig.enqueue(300);
    await waitFor(() => rig!.done(), 'every execution reported', 40_000);
    const figures = rig.figures();
    const byReplica = rig.reportsByReplica();
    console.log(
      `300 executions: ${JSON.stringify(figures)} in ${Date.now() - started} ms; reports by replica ${JSON.stringify(Object.fromEntries(byReplica))}`,
    );
    expect(figures).toMatchObject({ claimed: 300, reported: 300, duplicated: 0, lost: 0, rateLimited: 0 });
    expect(figures.maxPerSecond).toBeLessThanOrEqual(PER_SECOND);
    expect(figures.maxPerMinute).toBeLessThanOrEqual(PER_MINUTE);
    for (const name of ['a', 'b', 'c']) expect(byReplica.get(name) ?? 0).toBeGreaterThan(0);
  }, 60_000);
});
