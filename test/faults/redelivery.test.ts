// Issue 36, item 2: an execution the service hands out again while it is being run is run once and reported
// once, counted and logged once (standalone here; clustered in test/cluster/redelivery.test.ts).
import { describe, expect, it } from 'vitest';
import { redeliveredWhileRunning } from './redelivery-scenarios.ts';

describe('an execution handed out again while it runs (standalone)', () => {
  it('runs it once, reports it once, counts and logs the redelivery once', async () => {
    const result = await redeliveredWhileRunning();
    console.log(`redelivered while running: ${result.detail}`);
    expect(result.detail).toMatch(/handed out [2-9] times/);
    expect(result.runs).toBe(1);
    expect(result.reports).toBe(1);
    expect(result.detail).toContain('dfworker_redelivered_total 1; logged 1; outcome journal errors 0');
    expect(result.figures).toMatchObject({ lost: 0, duplicated: 0 });
    expect(result.budget.rateLimited).toBe(0);
    expect(result.completed).toBe(true);
  }, 30_000);
});
