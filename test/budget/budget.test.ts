import { getEventListeners } from 'node:events';
import { describe, expect, it } from 'vitest';
import { Budget, BudgetExhaustedError, classOf } from '../../src/budget/budget.ts';
import { monthWindow } from '../../src/budget/month.ts';
import { maxInWindow } from '../../src/budget/sliding-window.ts';
import { memoryBudgetStore, type BudgetState, type BudgetStore } from '../../src/budget/store.ts';
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

/** A store whose saves wait until the test settles them, one by one, in order. */
function heldStore(): {
  store: BudgetStore;
  saves: BudgetState[];
  settleNext: (error?: Error) => Promise<void>;
} {
  const pending: { resolve: () => void; reject: (error: Error) => void }[] = [];
  const saves: BudgetState[] = [];
  return {
    saves,
    store: {
      load: () => Promise.resolve(undefined),
      save: (state) =>
        new Promise<void>((resolve, reject) => {
          saves.push({ ...state });
          pending.push({ resolve, reject });
        }),
    },
    settleNext: async (error) => {
      const next = pending.shift();
      if (!next) throw new Error('no save is waiting');
      if (error) next.reject(error);
      else next.resolve();
      await flushMicrotasks();
    },
  };
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

  it('counts a send from when its request left, when that is later than when it was let through', async () => {
    const clock = new ManualClock(0);
    const budget = new Budget({ limits: { ...limits, perSecond: 2 }, clock, safetyMarginMs: 0 });
    const first = await budget.acquire('executions.report');
    const second = await budget.acquire('executions.report');
    let thirdAt: number | undefined;
    void budget.acquire('tasks.poll').then(() => (thirdAt = clock.now()));
    // Both reports are held after the gate (a fence, a connection being opened) and leave at 300 and 500 ms.
    await clock.advance(300);
    first.departed();
    await clock.advance(200);
    second.departed();
    await drain(clock, () => thirdAt !== undefined, 10);
    // Counted when let through, the poll would go at 1,000 ms; the second has room again at 1,300 ms.
    expect(thirdAt).toBe(1_300);
  });

  it('keeps serving after the wall clock steps back, with the windows as full as they really are', async () => {
    const start = Date.UTC(2026, 10, 10, 12);
    const clock = new ManualClock(start);
    const budget = new Budget({ limits, clock, safetyMarginMs: 200 });
    for (let i = 0; i < 5; i++) await budget.acquire('tasks.poll');
    // NTP or a resumed VM steps the clock back 15 minutes.
    clock.set(start - 15 * 60_000);
    // The second's five requests still count: the next waits its 1.2 s, not the 15 minutes until the
    // clock is back where the requests were recorded.
    expect(budget.earliestSendAt('report', clock.now())).toBe(clock.now() + 1_200);
    let reported = false;
    void budget.acquire('executions.report').then(() => (reported = true));
    await drain(clock, () => reported, 100, 20);
    expect(reported).toBe(true);
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

  it('serves handler calls after reports and control requests, before polls, whatever their operation', async () => {
    const clock = new ManualClock(0);
    const budget = new Budget({ limits, clock, safetyMarginMs: 0 });
    const handlerGate = budget.gateFor('handler');
    const order: string[] = [];
    for (let i = 0; i < 5; i++) void budget.acquire('tasks.poll').then(() => order.push(`fill${i}`));
    await flushMicrotasks();
    void budget.acquire('tasks.poll').then(() => order.push('poll'));
    void handlerGate.acquire('executions.get').then(() => order.push('handler'));
    void budget.acquire('tasks.list').then(() => order.push('control'));
    void budget.acquire('executions.report').then(() => order.push('report'));
    await drain(clock, () => order.length === 9);
    expect(order.slice(5)).toEqual(['report', 'control', 'handler', 'poll']);
  });

  it('keeps the report reserve from handler calls and counts them in the month', async () => {
    const clock = new ManualClock(Date.UTC(2026, 10, 3));
    const budget = new Budget({
      limits,
      clock,
      reportReserve: 8,
      store: memoryBudgetStore({ monthKey: '2026-11', used: 39_992 }),
    });
    await budget.load();
    let granted = false;
    void budget
      .gateFor('handler')
      .acquire('files.upload')
      .then(() => (granted = true));
    await clock.advance(1_000);
    expect(granted).toBe(false);
    expect(budget.earliestSendAt('handler')).toBe(monthWindow(clock.now()).endMs);
    expect(budget.monthUsed).toBe(39_992);
  });

  it('pauses every class when a handler call meets a 429', async () => {
    const clock = new ManualClock(0);
    const budget = new Budget({ limits, clock, safetyMarginMs: 0 });
    budget.gateFor('handler').observe?.({ operation: 'files.upload', status: 429, retryAfterMs: 5_000 });
    expect(budget.pausedUntil).toBe(5_000);
    let reported = false;
    void budget.acquire('executions.report').then(() => (reported = true));
    await clock.advance(4_900);
    expect(reported).toBe(false);
    await drain(clock, () => reported);
    expect(clock.now()).toBeGreaterThanOrEqual(5_000);
  });

  it('pauses every request until a 429 pause ends', async () => {
    const clock = new ManualClock(0);
    const budget = new Budget({ limits, clock, safetyMarginMs: 0 });
    budget.observe({ operation: 'tasks.poll', status: 429, retryAfterMs: 30_000 });
    let sentAt = -1;
    void budget.acquire('executions.report').then(() => (sentAt = clock.now()));
    await drain(clock, () => sentAt >= 0, 1_000);
    expect(sentAt).toBe(30_000);
  });

  it('pauses for the default pause after a 429 without Retry-After, and not at all for other answers', async () => {
    const clock = new ManualClock(0);
    const budget = new Budget({ limits, clock, safetyMarginMs: 0, rateLimitPauseMs: 7_000 });
    for (const status of [200, 404, 500, 503]) {
      budget.observe({ operation: 'tasks.poll', status, retryAfterMs: 5_000 });
    }
    expect(budget.pausedUntil).toBe(0);
    await clock.advance(1_000);
    budget.observe({ operation: 'tasks.list', status: 429, retryAfterMs: undefined });
    expect(budget.pausedUntil).toBe(8_000);
    // A shorter pause from a later 429 does not cut the longer one short.
    budget.observe({ operation: 'executions.report', status: 429, retryAfterMs: 1_000 });
    expect(budget.pausedUntil).toBe(8_000);
    let sentAt = -1;
    void budget.acquire('executions.report').then(() => (sentAt = clock.now()));
    await drain(clock, () => sentAt >= 0, 1_000);
    expect(sentAt).toBe(8_000);
  });

  it('rejects a waiting request when its signal aborts, and keeps serving the others', async () => {
    const clock = new ManualClock(0);
    const budget = new Budget({ limits, clock });
    budget.observe({ operation: 'tasks.poll', status: 429, retryAfterMs: 10_000 });
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

  it('leaves no abort listener on a long-lived signal once its requests are granted or refused', async () => {
    const clock = new ManualClock(Date.UTC(2026, 10, 3));
    const budget = new Budget({
      limits: { perSecond: 1000, perMinute: 100_000, perMonth: 1_000_000 },
      clock,
      leaseSize: 1_000,
    });
    const stop = new AbortController();
    for (let i = 0; i < 500; i++) await budget.acquire('tasks.poll', stop.signal);
    expect(budget.monthUsed).toBe(500);
    expect(getEventListeners(stop.signal, 'abort')).toHaveLength(0);

    const failing = new Budget({
      limits,
      clock,
      store: { load: () => Promise.resolve(undefined), save: () => Promise.reject(new Error('ENOSPC')) },
    });
    await expect(failing.acquire('executions.report', stop.signal)).rejects.toBeInstanceOf(
      BudgetExhaustedError,
    );
    expect(getEventListeners(stop.signal, 'abort')).toHaveLength(0);
  });

  it('still serves the next request when a lease write fails after the request it was for was aborted', async () => {
    const clock = new ManualClock(Date.UTC(2026, 10, 3));
    const { store, saves, settleNext } = heldStore();
    const budget = new Budget({ limits, clock, store, leaseSize: 20 });
    const pollStop = new AbortController();
    const poll = budget.acquire('tasks.poll', pollStop.signal);
    await flushMicrotasks();
    expect(saves).toHaveLength(1); // the poll's lease write is under way
    let report = 'pending';
    budget.acquire('executions.report').then(
      () => (report = 'granted'),
      (error: Error) => (report = `rejected: ${error.message}`),
    );
    pollStop.abort(new Error('worker stopping'));
    await expect(poll).rejects.toThrow('worker stopping');
    await settleNext(new Error('ENOSPC: no space left on device'));
    // The report, not dropped from the queue, gets its own lease write.
    expect(report).toBe('pending');
    expect(saves).toHaveLength(2);
    await settleNext();
    expect(report).toBe('granted');
    expect(budget.snapshot().waiting).toBe(0);
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

  it('keeps counting into a later month saved by a previous run while the clock is behind it', async () => {
    const store = memoryBudgetStore({ monthKey: '2026-02', used: 39_990 });
    const clock = new ManualClock(Date.parse('2026-01-31T23:59:00Z')); // three weeks behind at start
    const budget = new Budget({ limits, clock, store, safetyMarginMs: 0 });
    expect(await budget.load()).toBe('clock-behind');
    expect(budget.snapshot().month).toMatchObject({ key: '2026-02', used: 39_990 });
    await budget.acquire('tasks.list');
    expect((await store.load())?.monthKey).toBe('2026-02');
    expect((await store.load())?.used).toBeGreaterThanOrEqual(39_991);
    clock.set(Date.parse('2026-02-20T10:00:00Z')); // the clock is corrected
    expect(budget.snapshot().month).toMatchObject({ key: '2026-02', used: 39_991, remaining: 9 });
    let granted = 0;
    for (let i = 0; i < 20; i++) void budget.acquire('executions.report').then(() => granted++);
    await drain(clock, () => granted === 9, 1_000, 60);
    await clock.advance(60_000);
    expect(granted).toBe(9);
    expect(budget.monthUsed).toBe(40_000);
  });

  it('never resets the month usage when the clock steps back across a month boundary', async () => {
    const clock = new ManualClock(Date.parse('2026-02-01T00:00:30Z'));
    const store = memoryBudgetStore();
    const budget = new Budget({ limits, clock, store, safetyMarginMs: 0 });
    await budget.load();
    for (let i = 0; i < 3; i++) await budget.acquire('tasks.poll');
    clock.set(Date.parse('2026-01-31T23:59:00Z')); // stepped back into January
    expect(budget.snapshot().month).toMatchObject({ key: '2026-02', used: 3 });
    await budget.acquire('tasks.poll');
    await budget.flush();
    const saved = await store.load();
    expect({ monthKey: saved?.monthKey, used: saved?.used }).toEqual({ monthKey: '2026-02', used: 4 });
    expect(saved?.sentAt).toHaveLength(4); // the windows are saved too
    clock.set(Date.parse('2026-02-01T00:01:00Z'));
    expect(budget.snapshot().month).toMatchObject({ key: '2026-02', used: 4 });
    clock.set(Date.parse('2026-03-01T00:00:00Z')); // a real new month still starts a fresh count
    expect(budget.snapshot().month).toMatchObject({ key: '2026-03', used: 0 });
  });

  it('counts up to the last instant of a month whose first midnight does not exist, without rewriting the lease', async () => {
    // America/Asuncion: daylight-saving time began at midnight on 2023-10-01, so September ran until 04:00Z.
    const saves: BudgetState[] = [];
    const inner = memoryBudgetStore({ monthKey: '2023-09', used: 40_000 });
    const store: BudgetStore = { load: inner.load, save: (state) => (saves.push(state), inner.save(state)) };
    const clock = new ManualClock(Date.parse('2023-10-01T03:10:00Z')); // 23:10 on September 30 there
    const budget = new Budget({ limits, clock, store, timeZone: 'America/Asuncion', safetyMarginMs: 0 });
    expect(await budget.load()).toBe('restored');
    let sentAt = 0;
    void budget.acquire('executions.report').then(() => (sentAt = clock.now()));
    await clock.advance(30 * 60_000);
    expect(budget.snapshot().month).toMatchObject({ key: '2023-09', used: 40_000, remaining: 0 });
    expect(saves).toHaveLength(0);
    await drain(clock, () => sentAt > 0, 60_000, 60);
    expect(new Date(sentAt).toISOString()).toBe('2023-10-01T04:00:00.000Z');
    expect(budget.snapshot().month).toMatchObject({ key: '2023-10', used: 1 });
    expect(saves.map(({ monthKey, used }) => ({ monthKey, used }))).toEqual([
      { monthKey: '2023-10', used: 20 },
    ]);
    // The send's instant in the window, written ahead: never earlier than the send.
    expect(saves[0]!.sentAt).toHaveLength(1);
    expect(saves[0]!.sentAt![0]).toBeGreaterThanOrEqual(sentAt);
  });

  it('lets the read-back of a refused report (executions.get) use the report reserve', async () => {
    expect(classOf('executions.get')).toBe('report');
    const clock = new ManualClock(Date.UTC(2026, 10, 3));
    const budget = new Budget({
      limits,
      clock,
      reportReserve: 8,
      store: memoryBudgetStore({ monthKey: '2026-11', used: 39_995 }),
    });
    await budget.load();
    expect(budget.earliestSendAt('control')).toBe(monthWindow(clock.now()).endMs);
    let granted = false;
    void budget.acquire('executions.get').then(() => (granted = true));
    await clock.advance(1_000);
    expect(granted).toBe(true);
    expect(budget.monthUsed).toBe(39_996);
  });

  it('computes an idle pace that spreads what is left of the month over the time left', () => {
    const start = Date.UTC(2026, 10, 1);
    const clock = new ManualClock(start);
    const budget = new Budget({ limits, clock, reserveFraction: 0.1 });
    const monthMs = 30 * 86_400_000;
    expect(budget.idlePaceMs()).toBeCloseTo(monthMs / 40_000, 0);
    expect(budget.aheadOfPace()).toBe(false);
    clock.set(start + monthMs / 2);
    for (let i = 0; i < 30_000; i++) budget.recordSent(clock.now() - 61_000);
    // 10,000 left for 15 days: the pace slows down accordingly.
    expect(budget.idlePaceMs()).toBeCloseTo(monthMs / 2 / 10_000, 0);
    // Half the month gone: an even spend is 20,000, and the run-ahead allowance half of 10% of the month.
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

  it('starts a month whose midnight does not exist at the first instant of the 1st that does', () => {
    // America/Asuncion went from 2023-09-30 23:59:59 (UTC-4) to 2023-10-01 01:00 (UTC-3).
    const lastHourOfSeptember = monthWindow(Date.parse('2023-10-01T03:10:00Z'), 'America/Asuncion');
    expect(lastHourOfSeptember.key).toBe('2023-09');
    expect(new Date(lastHourOfSeptember.endMs).toISOString()).toBe('2023-10-01T04:00:00.000Z');
    const october = monthWindow(Date.parse('2023-10-01T04:00:00Z'), 'America/Asuncion');
    expect(october.key).toBe('2023-10');
    expect(new Date(october.startMs).toISOString()).toBe('2023-10-01T04:00:00.000Z');
    // Every instant of those days lies in its own month's window.
    for (
      let t = Date.parse('2023-09-30T00:00:00Z');
      t < Date.parse('2023-10-02T00:00:00Z');
      t += 5 * 60_000
    ) {
      const window = monthWindow(t, 'America/Asuncion');
      expect(window.startMs <= t && t < window.endMs).toBe(true);
    }
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

  it('estimates the month usage when budget.json is valid JSON of the wrong shape', async () => {
    const { mkdtemp, rm, writeFile } = await import('node:fs/promises');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const { BudgetStateError, fileBudgetStore } = await import('../../src/budget/store.ts');
    const dir = await mkdtemp(join(tmpdir(), 'df-budget-'));
    try {
      const clock = new ManualClock(Date.UTC(2026, 10, 16)); // half of November gone
      const shapes = [
        '{"monthKey": "2026-11", "used": "30000"}',
        '{"monthKey": "2026-11", "used": 30000.5}',
        '{"monthKey": "2026-11", "used": -1}',
        '{"monthKey": "November", "used": 30000}',
        '{"version": 2, "state": {"monthKey": "2026-11", "used": 30000}}',
        '{"monthKey": "2026-11", "used": 30000, "sentAt": "2026-11-16T00:00:00Z"}',
        '{"monthKey": "2026-11", "used": 30000, "sentAt": [1794787200000, "1794787200001"]}',
        '{"monthKey": "2026-11", "used": 30000, "sentAt": [-1]}',
        '{"monthKey": "2026-11", "used": 30000, "sentAt": [null]}',
        '{}',
        'null',
        '[]',
      ];
      for (const text of shapes) {
        await writeFile(join(dir, 'budget.json'), text);
        await expect(fileBudgetStore(dir).load(), text).rejects.toBeInstanceOf(BudgetStateError);
        const budget = new Budget({ limits, clock, store: fileBudgetStore(dir) });
        expect(await budget.load(), text).toBe('estimated');
        expect(budget.monthUsed, text).toBe(20_000);
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
