// Successor pacing hooked into the poll planner, on the manual clock: with 10 tasks idle (each polled every
// ~11 min at 40,000 requests a month), a reported step brings its successor's poll from its idle due time to
// a second after the report, the pacing's polls follow until it arrived, and then the idle pace takes over.
import { describe, expect, it } from 'vitest';
import { Budget } from '../../src/budget/budget.ts';
import { ManualClock } from '../../src/clock/manual-clock.ts';
import { PipelineModel } from '../../src/scheduler/pipeline-model.ts';
import { PollPlanner } from '../../src/scheduler/poll-planner.ts';
import { SuccessorPacing } from '../../src/scheduler/successor-pacing.ts';

const START = Date.UTC(2026, 10, 2, 9);
const JOBS = [
  {
    key: 'enrich',
    tasks: [
      { name: 'acme/k0', type: 'SUB_WORKFLOW' },
      { name: 'wait', type: 'WAIT' },
      { name: 'acme/k1', type: 'SUB_WORKFLOW' },
    ],
  },
];

function setUp(withPacing: boolean, readJobs = false) {
  const clock = new ManualClock(START);
  const budget = new Budget({ limits: { perSecond: 5, perMinute: 50, perMonth: 40_000 }, clock });
  const successors = new SuccessorPacing(clock);
  const planner = new PollPlanner({
    budget,
    maxPollIntervalMs: 900_000,
    errorBackoff: { baseMs: 1_000, maxMs: 300_000, random: () => 1 },
    ...(withPacing ? { successors } : {}),
  });
  const tasks = Array.from({ length: 10 }, (_, i) => ({ id: `t${i}`, key: `k${i}` }));
  planner.setTasks(tasks, START);
  const model = new PipelineModel(
    JOBS,
    tasks.map((t) => t.key),
  );
  if (readJobs) {
    successors.useModel(model);
    planner.replan();
  }
  // Every task polled once and found empty: each is now due at its idle pace.
  for (const t of tasks) planner.onEmpty(t.id, START);
  return { clock, planner, successors, model };
}

const dueOf = (planner: PollPlanner, id: string) => planner.tasks.find((t) => t.taskId === id)!.nextDueAt;

describe('the planner with successor pacing', () => {
  it('brings a reported step successor poll forward to a second after the report', () => {
    const without = setUp(false);
    const idleDue = dueOf(without.planner, 't1');
    expect(idleDue - START).toBeGreaterThan(5 * 60_000);

    const { clock, planner, successors, model } = setUp(true);
    expect(dueOf(planner, 't1')).toBe(idleDue);
    // k0's execution of a run of 'enrich' is reported at START + 10 s: k1 is its next custom step.
    clock.set(START + 10_000);
    successors.reported(model.successorOf('enrich', 0)!, 'run-1');
    planner.awaitSuccessor('k1');
    expect(dueOf(planner, 't1')).toBe(START + 11_000);
    expect(planner.next()!.taskId).toBe('t1');

    // The wait step ends 15 s after the report; the polls at 1, 3 and 8 s find nothing, the one at 20 s claims.
    const polls: number[] = [];
    for (;;) {
      const at = dueOf(planner, 't1');
      clock.set(at);
      polls.push((at - START - 10_000) / 1000);
      if (at >= START + 25_000) {
        planner.onHit('t1', at, START + 25_000);
        break;
      }
      planner.onEmpty('t1', at);
    }
    expect(polls).toEqual([1, 3, 8, 20]);
    expect(successors.delaysOf(model.successorOf('enrich', 0)!)).toEqual([15_000]);
    // After the hit, the re-poll at once, then back to the idle pace: no pacing poll is left.
    planner.onEmpty('t1', clock.now());
    expect(dueOf(planner, 't1') - clock.now()).toBeGreaterThan(5 * 60_000);
    expect(successors.nextPollAt('k1')).toBeUndefined();
  });

  it('idle-polls only what a job runs unannounced: a later step every 6 h, a task of no job daily', () => {
    const without = setUp(true);
    const { planner, model } = setUp(true, true);
    expect(model.idleRole('k0')).toBe('arrivals');
    expect(model.idleRole('k1')).toBe('after-report');
    expect(model.idleRole('k5')).toBe('no-job');
    expect(dueOf(planner, 't1') - START).toBe(6 * 3_600_000);
    expect(dueOf(planner, 't5') - START).toBe(24 * 3_600_000);
    // The budget the other nine no longer spend goes to k0, the one task that can arrive unannounced.
    expect(dueOf(planner, 't0') - START).toBeLessThan((dueOf(without.planner, 't0') - START) / 5);
    // Unchanged with a list some of whose jobs were unusable: a task in none of the rest may be in those.
    const partial = new PipelineModel(JOBS, ['k0', 'k1', 'k5'], { complete: false });
    expect(partial.idleRole('k5')).toBe('arrivals');
    expect(partial.idleRole('k1')).toBe('after-report');
    // A step after a custom step served elsewhere arrives unannounced: its report is not ours to see.
    expect(new PipelineModel(JOBS, ['k1']).idleRole('k1')).toBe('arrivals');
  });
});
