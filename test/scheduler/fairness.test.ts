// Slots shared between tasks: a task's own `concurrency` caps what it runs (and it is not polled while at its
// cap), and the fair share keeps the last free slot from a flooded task so a rare one is picked up at its poll
// pace rather than after a 30 s handler ends. The two-task runs are bench:fairness's rig on the manual clock.
import { describe, expect, it } from 'vitest';
import { fairShare, mayTakeSlot, type SlotClaim } from '../../src/scheduler/slot-share.ts';
import { quantile, runFairness, type FairnessRun } from './fairness-rig.ts';

const claim = (over: Partial<SlotClaim>): SlotClaim => ({
  busy: 0,
  concurrency: 4,
  tasks: 2,
  held: 0,
  taskLimit: undefined,
  fair: true,
  ...over,
});

describe('mayTakeSlot', () => {
  it('gives the last free slot only to a task below its fair share while other tasks are served', () => {
    expect(fairShare(4, 2)).toBe(2);
    expect(fairShare(4, 9)).toBe(1);
    expect(mayTakeSlot(claim({ busy: 2, held: 2 }))).toBe(true); // two free: one stays free after
    expect(mayTakeSlot(claim({ busy: 3, held: 3 }))).toBe(false); // the last one is kept for the other task
    expect(mayTakeSlot(claim({ busy: 3, held: 0 }))).toBe(true); // ... which may take it
    expect(mayTakeSlot(claim({ busy: 4, held: 0 }))).toBe(false);
  });

  it('lets a task served alone, or the shared pool of before, take every slot', () => {
    expect(mayTakeSlot(claim({ busy: 3, held: 3, tasks: 1 }))).toBe(true);
    expect(mayTakeSlot(claim({ busy: 3, held: 3, fair: false }))).toBe(true);
  });

  it("stops at the task's own concurrency, whatever else is free", () => {
    expect(mayTakeSlot(claim({ busy: 1, held: 1, taskLimit: 1 }))).toBe(false);
    expect(mayTakeSlot(claim({ busy: 1, held: 1, taskLimit: 1, fair: false, tasks: 1 }))).toBe(false);
    expect(mayTakeSlot(claim({ busy: 1, held: 0, taskLimit: 1 }))).toBe(true);
  });

  it('keeps a single slot usable by everyone (nothing to reserve)', () => {
    expect(mayTakeSlot(claim({ concurrency: 1, busy: 0, held: 0 }))).toBe(true);
  });
});

const RUN: FairnessRun = {
  fairShare: true,
  concurrency: 4,
  durationMs: 2 * 3_600_000,
  floodRunMs: 30_000,
  rareRunMs: 50,
  rareMeanGapMs: 300_000,
  maxPollIntervalMs: 10_000,
  seed: 7,
};

describe('Scheduler with a flooded task and a rare one', () => {
  it('without the fair share, the flood takes every slot and the rare task waits for a handler to end', async () => {
    const shared = await runFairness({ ...RUN, fairShare: false });
    expect(shared.mostFloodRunning).toBe(RUN.concurrency);
    expect(quantile(shared.rarePickupsMs, 0.95)).toBeGreaterThan(15_000);
  });

  it('with it, the flood leaves one slot and the rare task is picked up at its poll pace', async () => {
    const fair = await runFairness(RUN);
    expect(fair.rareArrivals).toBeGreaterThan(10);
    expect(fair.rarePickupsMs.length).toBeGreaterThanOrEqual(fair.rareArrivals - 1);
    expect(fair.mostFloodRunning).toBe(RUN.concurrency - 1);
    expect(quantile(fair.rarePickupsMs, 0.95)).toBeLessThan(RUN.maxPollIntervalMs);
  });

  it("runs at most the task's own concurrency, so it is never polled while full", async () => {
    // The flood always has work pending: a poll while 2 of its executions ran would have started a third.
    const capped = await runFairness({ ...RUN, floodConcurrency: 2, durationMs: 3_600_000 });
    expect(capped.mostFloodRunning).toBe(2);
    expect(capped.floodCompleted).toBeGreaterThanOrEqual(2 * (3_600_000 / RUN.floodRunMs) - 4);
  });
});
