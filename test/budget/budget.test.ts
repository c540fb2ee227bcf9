import { describe, expect, it } from 'vitest';
import { Budget } from '../../src/budget/budget.ts';
import { monthWindow } from '../../src/budget/month.ts';
import { maxInWindow } from '../../src/budget/sliding-window.ts';
import { memoryBudgetStore } from '../../src/budget/store.ts';
import { ManualClock, flushMicrotasks } from '../../src/clock/manual-clock.ts';

const limits = { perSecond: 5, perMinute: 50, perMonth: 40_000 };

async function drain(
  clock: ManualClock,
  done: () => boolean,
  stepMs = 10,
  maxSteps = 100_000,
): Promise<void> {
  for (let i = 0; i < maxSteps && !done(); i++) {
    await clock.advance(stepMs);
  }
}

describe('Budget windows', () => {
  it('never lets more than perSecond requests into any one-second window, nor perMinute into any minute', async () => {
    const clock = new ManualClock(Date.UTC(2026, 10, 3));
    const budget = new Budget({ limits, clock, safetyMarginMs: 0 });
    const sent: number[] = [];
    for (let i = 0; i < 120; i++) void budget.acquire('tasks.poll').then(() => sent.push(clock.now()));
    await drain(clock, () => sent.length === 120);
    expect(sent).toHaveLength(120);
    expect(maxInWindow(sent, 1_000)).toBe(5);
    expect(maxInWindow(sent, 60_000)).toBe(50);
    // 120 requests at 50 per minute need two full minutes before the last ones go.
    expect(sent[119]! - sent[0]!).toBeGreaterThanOrEqual(120_000);
  });

  it('keeps a safety margin on each window so latency jitter cannot push the service over', async () => {
    const clock = new ManualClock(0);
    const budget = new Budget({ limits, clock, safetyMarginMs: 200 });
    const sent: number[] = [];
    for (let i = 0; i < 10; i++) void budget.acquire('tasks.poll').then(() => sent.push(clock.now()));
    await drain(clock, () => sent.length === 10, 5);
    expect(sent[5]! - sent[0]!).toBeGreaterThanOrEqual(1_200);
    expect(maxInWindow(sent, 1_200)).toBe(5);
  });

  it('serves a waiting report before polls that queued earlier', async () => {
    const clock = new ManualClock(0);
    const budget = new Budget({ limits, clock, safetyMarginMs: 0 });
    const order: string[] = [];
    for (let i = 0; i < 8; i++) void budget.acquire('tasks.poll').then(() => order.push(`poll${i}`));
    await flushMicrotasks();
    void budget.acquire('executions.report').then(() => order.push('report'));
    await drain(clock, () => order.length === 9);
    // The first five polls filled the second; the report took the next free slot, ahead of poll5..7.
    expect(order.slice(0, 6)).toEqual(['poll0', 'poll1', 'poll2', 'poll3', 'poll4', 'report']);
  });

  it('pauses every request until a 429 pause ends', async () => {
    const clock = new ManualClock(0);
    const budget = new Budget({ limits, clock, safetyMarginMs: 0 });
    budget.pauseUntil(30_000);
    let sentAt = -1;
    void budget.acquire('executions.report').then(() => (sentAt = clock.now()));
    await drain(clock, () => sentAt >= 0, 1_000);
    expect(sentAt).toBe(30_000);
  });

  it('rejects a waiting request when its signal aborts, and keeps serving the others', async () => {
    const clock = new ManualClock(0);
    const budget = new Budget({ limits, clock });
    budget.pauseUntil(10_000);
    const controller = new AbortController();
    const aborted = budget.acquire('tasks.poll', controller.signal);
    let other = false;
    void budget.acquire('tasks.poll').then(() => (other = true));
    controller.abort(new Error('shutdown'));
    await expect(aborted).rejects.toThrow('shutdown');
    await drain(clock, () => other, 1_000);
    expect(other).toBe(true);
    expect(budget.monthUsed).toBe(1);
  });
});

describe('Budget month', () => {
  it('keeps the report reserve away from polls and lets reports use it', async () => {
    const clock = new ManualClock(Date.UTC(2026, 10, 3));
    const budget = new Budget({
      limits: { perSecond: 1000, perMinute: 100_000, perMonth: 10 },
      clock,
      reportReserve: 3,
      safetyMarginMs: 0,
    });
    let polls = 0;
    let reports = 0;
    for (let i = 0; i < 10; i++) void budget.acquire('tasks.poll').then(() => polls++);
    await drain(clock, () => polls === 7, 1, 1000);
    await clock.advance(1_000);
    expect(polls).toBe(7);
    expect(budget.earliestSendAt('poll')).toBe(monthWindow(clock.now()).endMs);
    for (let i = 0; i < 3; i++) void budget.acquire('executions.report').then(() => reports++);
    await drain(clock, () => reports === 3, 1, 1000);
    expect(reports).toBe(3);
    expect(budget.monthUsed).toBe(10);
  });

  it('starts a fresh count at the first instant of the next month in the configured time zone', async () => {
    const clock = new ManualClock(Date.UTC(2026, 10, 30, 22, 59, 0)); // 23:59 in Paris (UTC+1)
    const budget = new Budget({
      limits: { perSecond: 100, perMinute: 1000, perMonth: 2 },
      clock,
      timeZone: 'Europe/Paris',
      safetyMarginMs: 0,
    });
    await budget.acquire('tasks.poll');
    await budget.acquire('tasks.poll');
    expect(budget.snapshot().month).toMatchObject({ key: '2026-11', used: 2, remaining: 0 });
    let sentAt = 0;
    void budget.acquire('tasks.poll').then(() => (sentAt = clock.now()));
    await drain(clock, () => sentAt > 0, 1_000);
    expect(new Date(sentAt).toISOString()).toBe('2026-11-30T23:00:00.000Z');
    expect(budget.snapshot().month).toMatchObject({ key: '2026-12', used: 1 });
  });

  it('carries the month usage over a restart, never under-counting even after a crash', async () => {
    const clock = new ManualClock(Date.UTC(2026, 10, 3));
    const store = memoryBudgetStore();
    const first = new Budget({ limits, clock, store, leaseSize: 20 });
    await first.load();
    for (let i = 0; i < 7; i++) await first.acquire('tasks.poll').then(() => clock.advance(2_000));
    // Crash: no flush. The store holds the lease ceiling, not less than what was used.
    const afterCrash = new Budget({ limits, clock, store, leaseSize: 20 });
    await afterCrash.load();
    expect(afterCrash.monthUsed).toBeGreaterThanOrEqual(7);
    expect(afterCrash.monthUsed).toBeLessThanOrEqual(7 + 20);
    // Clean stop: the exact count is kept.
    await afterCrash.acquire('tasks.poll');
    const exact = afterCrash.monthUsed;
    await afterCrash.flush();
    const afterStop = new Budget({ limits, clock, store });
    await afterStop.load();
    expect(afterStop.monthUsed).toBe(exact);
  });

  it('ignores a previous month when restoring', async () => {
    const clock = new ManualClock(Date.UTC(2026, 10, 3));
    const budget = new Budget({
      limits,
      clock,
      store: memoryBudgetStore({ monthKey: '2026-10', used: 39_999 }),
    });
    await budget.load();
    expect(budget.monthUsed).toBe(0);
  });

  it('computes an idle pace that spreads what is left of the month over the time left', () => {
    const start = Date.UTC(2026, 10, 1);
    const clock = new ManualClock(start);
    const budget = new Budget({ limits, clock, reserveFraction: 0.1 });
    const monthMs = 30 * 86_400_000;
    expect(budget.idlePaceMs()).toBeCloseTo(monthMs / (40_000 * 0.9), 0);
    clock.set(start + monthMs / 2);
    for (let i = 0; i < 30_000; i++) budget.recordSent(clock.now() - 61_000);
    // 10,000 left for 15 days: the pace slows down accordingly.
    expect(budget.idlePaceMs()).toBeCloseTo(monthMs / 2 / (10_000 * 0.9), 0);
    expect(budget.aheadOfPace()).toBe(true);
  });
});

describe('monthWindow', () => {
  it('finds month bounds in UTC and across a daylight-saving change', () => {
    expect(monthWindow(Date.UTC(2026, 1, 14), 'UTC')).toEqual({
      key: '2026-02',
      startMs: Date.UTC(2026, 1, 1),
      endMs: Date.UTC(2026, 2, 1),
    });
    // New York: March starts in EST (UTC-5), April in EDT (UTC-4).
    const march = monthWindow(Date.UTC(2026, 2, 15), 'America/New_York');
    expect(new Date(march.startMs).toISOString()).toBe('2026-03-01T05:00:00.000Z');
    expect(new Date(march.endMs).toISOString()).toBe('2026-04-01T04:00:00.000Z');
  });
});

describe('fileBudgetStore', () => {
  it('keeps the month usage in the state folder across instances, and estimates it when the file is corrupt', async () => {
    const { mkdtemp, rm, writeFile } = await import('node:fs/promises');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const { fileBudgetStore } = await import('../../src/budget/store.ts');
    const dir = await mkdtemp(join(tmpdir(), 'df-budget-'));
    try {
      const clock = new ManualClock(Date.UTC(2026, 10, 16)); // half of November gone
      const first = new Budget({ limits, clock, store: fileBudgetStore(dir) });
      expect(await first.load()).toBe('fresh');
      await first.acquire('tasks.poll');
      await first.flush();
      const second = new Budget({ limits, clock, store: fileBudgetStore(dir) });
      expect(await second.load()).toBe('restored');
      expect(second.monthUsed).toBe(1);

      await writeFile(join(dir, 'budget.json'), '{"monthKey": "2026-11", "us');
      const third = new Budget({ limits, clock, store: fileBudgetStore(dir) });
      expect(await third.load()).toBe('estimated');
      expect(third.monthUsed).toBe(20_000);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
