// Issue 36, item 2 in clustered mode: the coordinator claims, replicas run. An execution the service hands out
// again while a replica runs it is not queued again: run once, reported once, counted and logged once.
import { describe, expect, it } from 'vitest';
import { clusteredTestsRun } from '../cluster/redis-server.ts';
import { redeliveredWhileReplicaRuns } from './redelivery-scenarios.ts';

describe.runIf(clusteredTestsRun)('an execution handed out again while a replica runs it (clustered)', () => {
  it('is not queued again: one run, one report, counted and logged once', async () => {
    const result = await redeliveredWhileReplicaRuns();
    console.log(`clustered redelivery: ${result.detail}; ${JSON.stringify(result.budget)}`);
    expect(result.runs).toBe(1);
    expect(result.reports).toBe(1);
    expect(result.detail).toContain('logged 1; dfworker_redelivered_total 1');
    expect(result.figures).toMatchObject({ lost: 0, duplicated: 0 });
    expect(result.budget.rateLimited).toBe(0);
    expect(result.budget.maxPerSecond).toBeLessThanOrEqual(5);
    expect(result.completed).toBe(true);
  }, 60_000);
});
