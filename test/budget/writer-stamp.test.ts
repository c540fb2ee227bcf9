// Saved window sends say which process on which boot wrote them: a restart on the same boot keeps each send's
// monotonic age, whatever the wall clock did between the two runs; another boot trusts the wall clock.
import { describe, expect, it } from 'vitest';
import { Budget } from '../../src/budget/budget.ts';
import { memoryBudgetStore, type BudgetStore } from '../../src/budget/store.ts';
import { ManualClock } from '../../src/clock/manual-clock.ts';
import type { WriterStamp } from '../../src/clock/writer-stamp.ts';

const START = Date.UTC(2026, 10, 27, 12);
const LIMITS = { perSecond: 5, perMinute: 50, perMonth: 40_000 };

/** A stamp read off `clock` as the system's would be off its clocks, on boot `bootId`. */
function stampOf(clock: ManualClock, bootId: string): () => WriterStamp {
  return () => ({ bootId, pid: 4242, sinceBootMs: clock.monotonic(), wallMs: clock.now() });
}

async function fullSecondSaved(clock: ManualClock, store: BudgetStore): Promise<void> {
  const budget = new Budget({
    limits: LIMITS,
    clock,
    store,
    writerStamp: stampOf(clock, 'boot-1'),
    safetyMarginMs: 0,
  });
  await budget.load();
  for (let i = 0; i < LIMITS.perSecond; i++) budget.recordSent();
  await budget.flush();
}

async function restarted(clock: ManualClock, store: BudgetStore, bootId: string): Promise<Budget> {
  const budget = new Budget({
    limits: LIMITS,
    clock,
    store,
    writerStamp: stampOf(clock, bootId),
    safetyMarginMs: 0,
  });
  await budget.load();
  return budget;
}

describe('saved window sends and the process that wrote them', () => {
  it('stamps what it saves with its boot, process and clocks', async () => {
    const clock = new ManualClock(START);
    const store = memoryBudgetStore();
    await fullSecondSaved(clock, store);
    expect((await store.load())?.writer).toEqual({
      bootId: 'boot-1',
      pid: 4242,
      sinceBootMs: START,
      wallMs: START,
    });
  });

  it('same boot, wall clock stepped 1 h forward across the restart: the second is still full', async () => {
    const clock = new ManualClock(START);
    const store = memoryBudgetStore();
    await fullSecondSaved(clock, store);
    clock.step(3_600_000);
    await clock.advance(100);
    const budget = await restarted(clock, store, 'boot-1');
    // Read on the wall clock alone, the sends would be an hour old and forgotten: a burst over 5/s.
    expect(budget.earliestSendAt('poll') - clock.monotonic()).toBe(900);
  });

  it('same boot, wall clock stepped 1 h back: the sends age as they did, no minute held for them', async () => {
    const clock = new ManualClock(START);
    const store = memoryBudgetStore();
    await fullSecondSaved(clock, store);
    clock.step(-3_600_000);
    await clock.advance(1_000);
    const budget = await restarted(clock, store, 'boot-1');
    expect(budget.earliestSendAt('poll')).toBe(clock.monotonic());
  });

  it('another boot trusts the wall clock (only it is shared): stepped forward, the sends are forgotten', async () => {
    const clock = new ManualClock(START);
    const store = memoryBudgetStore();
    await fullSecondSaved(clock, store);
    clock.step(3_600_000);
    await clock.advance(100);
    const budget = await restarted(clock, store, 'boot-2');
    expect(budget.earliestSendAt('poll')).toBe(clock.monotonic());
  });
});
