// A whole month of idle polling, simulated synchronously on the same Budget and PollPlanner the daemon uses.
import { describe, expect, it } from 'vitest';
import { Budget } from '../../src/budget/budget.ts';
import { monthWindow } from '../../src/budget/month.ts';
import { DEFAULT_BACKOFF } from '../../src/clock/backoff.ts';
import { ManualClock } from '../../src/clock/manual-clock.ts';
import { PollPlanner } from '../../src/scheduler/poll-planner.ts';

interface SimulationResult {
  polls: number;
  perTask: Map<string, number[]>;
  lastPollAt: number;
  monthEnd: number;
  maxGapMs: number;
}

/** Polls idle tasks for one month; `hits(key, t)` says whether a poll finds work (then a report is sent too). */
function simulateMonth(
  taskCount: number,
  options: { perMonth?: number; hits?: (key: string, t: number) => boolean } = {},
): SimulationResult & { monthUsed: number } {
  const start = Date.UTC(2026, 10, 1);
  const clock = new ManualClock(start);
  const budget = new Budget({
    limits: { perSecond: 5, perMinute: 50, perMonth: options.perMonth ?? 40_000 },
    clock,
    reportReserve: 4,
  });
  const planner = new PollPlanner({
    budget,
    maxPollIntervalMs: 15 * 60_000,
    errorBackoff: { ...DEFAULT_BACKOFF, random: () => 0.5 },
  });
  planner.setTasks(
    Array.from({ length: taskCount }, (_, i) => ({ id: `t${i}`, key: `task-${i}` })),
    start,
  );
  const { endMs } = monthWindow(start);
  const perTask = new Map<string, number[]>();
  let polls = 0;
  // Read after each request: once the loop looks past the month's end, the budget has rolled to the next.
  let monthUsed = 0;
  let lastPollAt = start;
  for (;;) {
    const task = planner.next()!;
    const at = Math.max(task.nextDueAt, budget.earliestSendAt('poll', task.nextDueAt));
    if (at >= endMs) break;
    clock.set(at);
    budget.recordSent(at);
    monthUsed = budget.monthUsed;
    polls++;
    lastPollAt = at;
    const times = perTask.get(task.key) ?? [];
    times.push(at);
    perTask.set(task.key, times);
    if (options.hits?.(task.key, at)) {
      const reportAt = Math.max(at, budget.earliestSendAt('report', at));
      // A report the month cannot carry would leave it; the month's usage is read before that.
      if (reportAt >= endMs)
        throw new Error(`a report had to wait for the next month (at ${new Date(at).toISOString()})`);
      budget.recordSent(reportAt);
      monthUsed = budget.monthUsed;
      planner.onHit(task.taskId, at);
    } else {
      planner.onEmpty(task.taskId, at);
    }
  }
  let maxGapMs = 0;
  for (const times of perTask.values()) {
    for (let i = 1; i < times.length; i++) maxGapMs = Math.max(maxGapMs, times[i]! - times[i - 1]!);
  }
  return { polls, perTask, lastPollAt, monthEnd: endMs, maxGapMs, monthUsed };
}

describe('a simulated month of idle polling', () => {
  it('never exceeds the monthly limit and keeps polling until the last hour of the month', () => {
    const started = performance.now();
    const result = simulateMonth(3);
    const elapsedMs = performance.now() - started;
    expect(result.monthUsed).toBeLessThanOrEqual(40_000);
    // Not exhausted early: polls continue in the month's final hour.
    expect(result.monthEnd - result.lastPollAt).toBeLessThan(3_600_000);
    // Idle polling uses most of the month (the rest stays available for work and reports).
    expect(result.polls).toBeGreaterThan(30_000);
    // Three tasks share the pace evenly.
    const counts = [...result.perTask.values()].map((t) => t.length);
    expect(Math.max(...counts) - Math.min(...counts)).toBeLessThanOrEqual(1);
    const hours = 30 * 24;
    const perTaskPerHour = result.polls / 3 / hours;
    console.log(
      `month simulation: 3 idle tasks, ${result.polls} polls, ${perTaskPerHour.toFixed(1)} idle polls per task per hour, ` +
        `longest gap ${(result.maxGapMs / 60_000).toFixed(1)} min, simulated in ${elapsedMs.toFixed(0)} ms`,
    );
    expect(perTaskPerHour).toBeGreaterThan(12);
    expect(elapsedMs).toBeLessThan(1_000);
  });

  it('paces a single task at about one poll a minute and a half, within the 15-minute maximum interval', () => {
    const result = simulateMonth(1);
    expect(result.monthUsed).toBeLessThanOrEqual(40_000);
    expect(result.maxGapMs).toBeLessThan(15 * 60_000);
    expect(result.monthEnd - result.lastPollAt).toBeLessThan(3_600_000);
  });

  it('slows idle polling after a day of heavy work instead of exhausting the month', () => {
    // Day 2: every poll finds work for 24 hours (a large backlog).
    const day = 86_400_000;
    const start = Date.UTC(2026, 10, 1);
    const result = simulateMonth(2, { hits: (_key, t) => t >= start + day && t < start + 2 * day });
    expect(result.monthUsed).toBeLessThanOrEqual(40_000);
    expect(result.monthEnd - result.lastPollAt).toBeLessThan(3_600_000);
  });

  it('picks up work that trickles in (one execution every 5 min) within minutes, to the end of the month', () => {
    const start = Date.UTC(2026, 10, 1);
    const everyMs = 300_000;
    let claimed = 0;
    let longestWaitMs = 0;
    const result = simulateMonth(1, {
      hits: (_key, t) => {
        const arrived = Math.floor((t - start) / everyMs) + 1;
        if (arrived <= claimed) return false;
        longestWaitMs = Math.max(longestWaitMs, t - (start + claimed * everyMs));
        claimed++;
        return true;
      },
    });
    const enqueued = Math.floor((result.monthEnd - start) / everyMs);
    console.log(
      `month simulation: 1 task, ${enqueued} executions (one every 5 min), ${claimed} claimed, ` +
        `longest pickup wait ${(longestWaitMs / 60_000).toFixed(1)} min, ${result.monthUsed} requests`,
    );
    expect(result.monthUsed).toBeLessThanOrEqual(40_000);
    expect(enqueued - claimed).toBeLessThanOrEqual(1);
    expect(longestWaitMs).toBeLessThan(15 * 60_000);
  });

  it('stays within a tiny monthly budget with many tasks, polling every task less often rather than stopping', () => {
    const result = simulateMonth(50, { perMonth: 2_000 });
    expect(result.monthUsed).toBeLessThanOrEqual(2_000);
    expect(result.monthEnd - result.lastPollAt).toBeLessThan(6 * 3_600_000);
    for (const times of result.perTask.values()) expect(times.length).toBeGreaterThan(20);
  });
});
