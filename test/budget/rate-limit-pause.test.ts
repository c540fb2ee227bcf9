// A 429's Retry-After as the service (or a proxy in front of it) may send it: sane, absent, or absurd.
import { describe, expect, it } from 'vitest';
import { parseRetryAfter } from '../../src/api/response.ts';
import { Budget, type RateLimitPause } from '../../src/budget/budget.ts';
import { ManualClock } from '../../src/clock/manual-clock.ts';
import { WorkerEvents } from '../../src/events/worker-events.ts';

const limits = { perSecond: 5, perMinute: 50, perMonth: 40_000 };
const START = Date.UTC(2026, 10, 27, 12);

function pausedBudget(retryAfter: string | undefined, options: { retryAfterMaxMs?: number } = {}) {
  const clock = new ManualClock(START);
  const pauses: RateLimitPause[] = [];
  const events = new WorkerEvents();
  events.on('rateLimited', (pause) => pauses.push(pause));
  const budget = new Budget({
    limits,
    clock,
    safetyMarginMs: 0,
    rateLimitPauseMs: 60_000,
    ...options,
    events,
  });
  const retryAfterMs = parseRetryAfter(retryAfter, clock.now());
  budget.observe({ operation: 'tasks.poll', status: 429, retryAfterMs });
  return { clock, budget, pauses };
}

/** When the next report leaves after the pause, driving the clock a second at a time. */
async function reportSentAt(clock: ManualClock, budget: Budget, horizonMs: number): Promise<number> {
  let sentAt = -1;
  void budget.acquire('executions.report').then(() => (sentAt = clock.now()));
  while (sentAt < 0 && clock.now() - START < horizonMs) await clock.advance(1_000);
  return sentAt - START;
}

describe('a 429 pause', () => {
  it.each([
    ['a billion seconds', '1000000000'],
    ['2147484 seconds (just past a 32-bit timer)', '2147484'],
    ['an HTTP date in 2099', 'Thu, 01 Jan 2099 00:00:00 GMT'],
  ])(
    'is cut to DF_RETRY_AFTER_MAX_MS when Retry-After asks %s: reports leave when it ends',
    async (_, value) => {
      const { clock, budget, pauses } = pausedBudget(value, { retryAfterMaxMs: 120_000 });
      expect(budget.pausedUntil - START).toBe(120_000);
      expect(pauses).toHaveLength(1);
      expect(pauses[0]!.pauseMs).toBe(120_000);
      expect(pauses[0]!.retryAfterMs).toBeGreaterThan(1e9);
      expect(await reportSentAt(clock, budget, 600_000)).toBe(120_000);
    },
  );

  it('takes a sane Retry-After as it is, and the default pause when there is none, both within the cap', () => {
    expect(pausedBudget('30').budget.pausedUntil - START).toBe(30_000);
    expect(pausedBudget(undefined).budget.pausedUntil - START).toBe(60_000);
    expect(pausedBudget(undefined, { retryAfterMaxMs: 10_000 }).budget.pausedUntil - START).toBe(10_000);
  });

  it('is told once per pause: a 429 within a running pause that does not lengthen it says nothing', async () => {
    const { clock, budget, pauses } = pausedBudget('30');
    await clock.advance(1_000);
    budget.observe({ operation: 'executions.report', status: 429, retryAfterMs: 10_000 });
    expect(pauses).toHaveLength(1);
    budget.observe({ operation: 'executions.report', status: 429, retryAfterMs: 60_000 });
    expect(pauses.map((p) => [p.operation, p.retryAfterMs, p.pauseMs, p.until - START])).toEqual([
      ['tasks.poll', 30_000, 30_000, 30_000],
      ['executions.report', 60_000, 60_000, 61_000],
    ]);
  });

  it('ranks reports ahead of polls waiting for the end of the pause', async () => {
    const { clock, budget } = pausedBudget('5');
    const order: string[] = [];
    void budget.acquire('tasks.poll').then(() => order.push('poll'));
    void budget.acquire('executions.report').then(() => order.push('report'));
    while (order.length < 2) await clock.advance(500);
    expect(order).toEqual(['report', 'poll']);
  });
});
