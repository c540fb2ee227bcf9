// The job-executions list standing in for idle polls, on the manual clock against the emulator (in process):
// a task that is a job's first step is idle-polled every 6 h while the list is read; a run the list shows
// starting brings that task's poll to a second after the run's start, and the arrival ends the wait. Runs
// already ended, or whose step was claimed since they started, await nothing; a list the watch cannot read
// in its terms (a run without `status`, not newest first) is reported unusable.
import { describe, expect, it } from 'vitest';
import { ResponseValidationError } from '../../src/api/errors.ts';
import { ServiceClient } from '../../src/api/client.ts';
import { Budget } from '../../src/budget/budget.ts';
import { ManualClock } from '../../src/clock/manual-clock.ts';
import { Emulator } from '../../src/emulator/emulator.ts';
import { inProcessTransport } from '../../src/emulator/in-process.ts';
import { JobRunWatch, listIntervalFor } from '../../src/scheduler/job-run-watch.ts';
import { PipelineModel } from '../../src/scheduler/pipeline-model.ts';
import { PollPlanner } from '../../src/scheduler/poll-planner.ts';
import { SuccessorPacing } from '../../src/scheduler/successor-pacing.ts';

const START = Date.UTC(2026, 10, 2, 9);
const KEY = 'watch-key';
const JOBS = [
  {
    key: 'enrich',
    tasks: [
      { name: 'wait', type: 'WAIT' },
      { name: 'acme/k0', type: 'SUB_WORKFLOW' },
      { name: 'acme/k1', type: 'SUB_WORKFLOW' },
    ],
  },
];

function setUp() {
  const clock = new ManualClock(START);
  const emulator = new Emulator({ clock, apiKeys: [KEY], limits: { perSecond: 5, perMinute: 50 } });
  const budget = new Budget({ limits: { perSecond: 5, perMinute: 50, perMonth: 40_000 }, clock });
  const client = new ServiceClient({
    baseUrl: 'http://service.invalid',
    apiKey: KEY,
    gate: budget,
    transport: inProcessTransport(emulator),
    clock,
  });
  const job = String(emulator.createJob({ ...JOBS[0]! }).id);
  const successors = new SuccessorPacing(clock);
  const planner = new PollPlanner({
    budget,
    maxPollIntervalMs: 900_000,
    errorBackoff: { baseMs: 1_000, maxMs: 300_000, random: () => 1 },
    successors,
  });
  const tasks = Array.from({ length: 10 }, (_, i) => ({ id: `t${i}`, key: `k${i}` }));
  planner.setTasks(tasks, START);
  const model = new PipelineModel(
    JOBS,
    tasks.map((t) => t.key),
  );
  successors.useModel(model);
  successors.useJobList(listIntervalFor(40_000));
  planner.replan();
  for (const t of tasks) planner.onEmpty(t.id, START);
  const watch = new JobRunWatch({
    source: client,
    pacing: successors,
    clock,
    monotonicAt: (ms) => ms,
  });
  const read = () => watch.read(model, () => 'enrich');
  return { clock, emulator, budget, job, planner, successors, watch, read };
}

const dueOf = (planner: PollPlanner, id: string) => planner.tasks.find((t) => t.taskId === id)!.nextDueAt;

describe('the job-executions list under successor pacing', () => {
  it('reads every 259 s at 40,000 a month: a quarter of the month, never under a minute', () => {
    expect(listIntervalFor(40_000)).toBe(259_200);
    expect(listIntervalFor(10_000)).toBe(1_036_800);
    expect(listIntervalFor(10_000_000)).toBe(60_000);
  });

  it('brings a first step poll from its 6 h idle poll to a second after the run it shows starting', async () => {
    const { clock, emulator, job, planner, successors, read } = setUp();
    // k0 is the job's first custom step: with the list, it is polled every 6 h, not at the idle pace.
    expect(successors.rareIdleIntervalMs('k0')).toBe(6 * 3_600_000);
    expect(dueOf(planner, 't0') - START).toBe(6 * 3_600_000);
    // A task of no job keeps its 24 h.
    expect(successors.rareIdleIntervalMs('k5')).toBe(24 * 3_600_000);

    clock.set(START + 60_000);
    const run = emulator.startJobRun(job);
    clock.set(START + 100_000);
    const outcome = await read();
    expect(outcome).toEqual({ kind: 'listed', awaited: ['k0'], requests: 1 });
    planner.awaitSuccessor('k0');
    // The burst's first poll is 1 s after the run's start (its startedAt), already past: due now.
    expect(dueOf(planner, 't0')).toBe(START + 61_000);

    // The step arrives and is claimed: the wait ends and the start-to-step delay is learnt.
    planner.onHit('t0', START + 101_000, START + 100_000, job);
    expect(successors.awaitedTasks()).not.toContain('k0');
    expect(successors.delaysOf({ job: 'enrich', from: -1, to: 1 })).toEqual([40_000]);

    // The same run shown again awaits nothing more.
    clock.set(START + 400_000);
    expect(await read()).toEqual({ kind: 'listed', awaited: [], requests: 1 });
    expect(run.status).toBe('IN_PROGRESS');
  });

  it('awaits nothing for a run that ended, or whose step was claimed since it started', async () => {
    const { clock, emulator, job, watch, read } = setUp();
    const ended = emulator.startJobRun(job);
    clock.set(START + 10_000);
    emulator.endJobRun(ended.id);
    expect(await read()).toEqual({ kind: 'listed', awaited: [], requests: 1 });

    clock.set(START + 20_000);
    emulator.startJobRun(job);
    clock.set(START + 30_000);
    watch.claimed(job);
    clock.set(START + 40_000);
    expect(await read()).toEqual({ kind: 'listed', awaited: [], requests: 1 });
  });

  it('throws naming the field when a run lacks its status, and says unusable when not newest first', async () => {
    const { clock, emulator, job, read } = setUp();
    emulator.startJobRun(job, { status: null });
    await expect(read()).rejects.toBeInstanceOf(ResponseValidationError);
    await expect(read()).rejects.toThrow(/status/);

    const other = setUp();
    other.emulator.startJobRun(other.job, { createdAt: new Date(START - 60_000).toISOString() });
    other.clock.set(START + 1_000);
    other.emulator.startJobRun(other.job, { createdAt: new Date(START - 120_000).toISOString() });
    // The emulator sorts newest first when asked: the two above come back in order; a service that
    // ignored the sort would answer them oldest first, which the watch refuses.
    expect((await other.read()).kind).toBe('listed');
    const unsorted = new JobRunWatch({
      source: {
        listJobExecutions: () =>
          Promise.resolve({
            object: 'list',
            totalElements: 2,
            data: [
              { id: 'a', jobId: other.job, status: 'IN_PROGRESS', createdAt: new Date(START).toISOString() },
              {
                id: 'b',
                jobId: other.job,
                status: 'IN_PROGRESS',
                createdAt: new Date(START + 1).toISOString(),
              },
            ],
          }),
      },
      pacing: other.successors,
      clock: other.clock,
      monotonicAt: (ms) => ms,
    });
    const model = new PipelineModel(JOBS, ['k0', 'k1']);
    expect(await unsorted.read(model, () => 'enrich')).toMatchObject({
      kind: 'unusable',
      why: 'the list is not sorted newest first by createdAt',
    });
    expect(clock.now()).toBe(START);
  });
});
