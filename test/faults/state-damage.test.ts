// Issue 26, items 4 and 5: damaged journal records and a vanished state lock, each against the real
// `df-worker start` at the key's limits (5/s, 50/min), as the emulator counts them. The lost budget.json
// waits out a real minute: it has its own file (lost-budget-file.test.ts) so that it runs beside these.
import { describe, expect, it } from 'vitest';
import { damagedRecords, LIMITS, vanishedLock } from './state-damage-scenarios.ts';
import type { StateDamageResult } from './state-damage-scenarios.ts';

function expectWithinBudget(result: StateDamageResult): void {
  expect(result.budget.rateLimited).toBe(0);
  expect(result.budget.maxPerSecond).toBeLessThanOrEqual(LIMITS.perSecond);
  expect(result.budget.maxPerMinute).toBeLessThanOrEqual(LIMITS.perMinute);
}

describe('damaged and lost state', () => {
  it('damaged journal records: each execution is fetched from the service and run again or left as the service holds it, reported once, none lost', async () => {
    const result = await damagedRecords();
    // Truncated, garbage, wrong types, and an edited record whose checksum no longer matches: run again with
    // the service's input (tally.wrong counts an output that differs from what that input gives).
    expect(result.reportsOf).toEqual({ truncated: 1, garbage: 1, wrongTypes: 1, edited: 1, completed: 1 });
    expect(result.tally.wrong).toBe(0);
    expect(result.figures.lost).toBe(0);
    expect(result.figures.duplicated).toBe(0);
    expect(result.figures).toEqual({ claimed: 8, reported: 8, duplicated: 0, lost: 0 });
    // 6 damaged files, 2 GETs answered 503 and tried again: at least 8 GETs, through the same budget.
    expect(result.fetches).toBeGreaterThanOrEqual(8);
    expect(result.keptForInspection).toBe(6);
    expect(result.journalAfter).toEqual(['corrupt']);
    expect(result.daemonAlive).toBe(true);
    expectWithinBudget(result);
  }, 60_000);

  it('state folder deleted under a running daemon and a second one started: the first stops claiming and exits 75 with the reason, the second takes over, no 429', async () => {
    const result = await vanishedLock();
    expect(result.firstExitCode).toBe(75);
    expect(result.firstReason).toMatch(/lock file .*df-worker\.lock vanished/);
    expect(result.noticedAfterMs).toBeLessThan(2_000);
    expect(result.firstPollsAfterNotice).toBe(0);
    expect(result.figures.lost).toBe(0);
    expect(result.figures.duplicated).toBe(0);
    expect(result.tally.wrong).toBe(0);
    expect(result.secondAlive).toBe(true);
    expectWithinBudget(result);
  }, 60_000);
});
