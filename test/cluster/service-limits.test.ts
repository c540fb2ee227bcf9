// Three replicas at the service's own limits (5 a second, 50 a minute): together they stay within both windows
// as the emulator counts them, and draw no 429.
import { describe, expect, it } from 'vitest';
import { waitFor } from '../daemon/harness.ts';
import { clusterFixture } from './cluster-rig.ts';
import { clusteredTestsRun } from './redis-server.ts';

describe.runIf(clusteredTestsRun)('three replicas at the service limits', () => {
  const cluster = clusterFixture();

  it('15 executions: each reported once, never more than 5 in a second or 50 in a minute, no 429', async () => {
    const rig = await cluster.create({ perSecond: 5, perMinute: 50 });
    await Promise.all(['a', 'b', 'c'].map((name) => rig.start(name)));
    const started = Date.now();
    rig.enqueue(15);
    await waitFor(() => rig.done(), 'every execution reported', 40_000);
    const figures = rig.figures();
    console.log(`at 5/s and 50/min: ${JSON.stringify(figures)} in ${Date.now() - started} ms`);
    expect(figures).toMatchObject({ claimed: 15, reported: 15, duplicated: 0, lost: 0, rateLimited: 0 });
    expect(figures.maxPerSecond).toBeLessThanOrEqual(5);
    expect(figures.maxPerMinute).toBeLessThanOrEqual(50);
  }, 50_000);
});
