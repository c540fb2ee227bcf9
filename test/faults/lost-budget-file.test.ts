// Issue 26, item 5: budget.json lost between two runs on the same state folder, against the real
// `df-worker start` at the key's limits (5/s, 50/min). Slow on purpose (about 70 s): the restart takes the
// windows as full, so its first request waits out a real minute. Alone in its file so that it runs beside
// the other files rather than after them (state-damage.test.ts has the rest of issue 26's state rows).
import { describe, expect, it } from 'vitest';
import { LIMITS, lostBudgetFile } from './state-damage-scenarios.ts';

describe('budget.json lost between two runs', () => {
  it('budget.json deleted before a restart: the restart is no first start (windows taken as full, no 429), every execution reported once', async () => {
    const result = await lostBudgetFile();
    expect(result.warning).toMatch(/budget\.json is missing from a state folder an earlier run used/);
    // The windows are taken as full at the restart: its first request waits out the minute.
    expect(result.firstRequestAfterMs).toBeGreaterThan(50_000);
    expect(result.figures.lost).toBe(0);
    expect(result.figures.duplicated).toBe(0);
    expect(result.tally.wrong).toBe(0);
    expect(result.daemonAlive).toBe(true);
    expect(result.budget.rateLimited).toBe(0);
    expect(result.budget.maxPerSecond).toBeLessThanOrEqual(LIMITS.perSecond);
    expect(result.budget.maxPerMinute).toBeLessThanOrEqual(LIMITS.perMinute);
  }, 150_000);
});
