// The daemon itself on a chained month (the month replay, virtual time): with DF_PIPELINE_PACING it reads the
// emulator's job definitions and picks a job's second step up within seconds of its creation, where today's
// planner waits for the task's idle poll; within the budget (no 429, the month lasts).
import { describe, expect, it } from 'vitest';
import { laterStepsP95 } from '../../src/replay/chained-summary.ts';
import type { JobsFile } from '../../src/replay/jobs.ts';
import { replayMonth } from '../../src/replay/replay.ts';
import { summarize } from '../../src/replay/summary.ts';
import { monthBounds } from '../../src/replay/workloads.ts';

const { startsAt } = monthBounds('2026-11');
const hours = (h: number) => startsAt + h * 3_600_000;

const FILE: JobsFile = {
  jobs: [
    {
      key: 'enrich',
      pipeline: 'p1',
      tasks: [
        { name: 'acme/extract', type: 'SUB_WORKFLOW' },
        { name: 'wait', type: 'BUILTIN', durationMs: 30_000 },
        { name: 'acme/translate', type: 'SUB_WORKFLOW' },
      ],
    },
  ],
  runs: [
    { job: 'enrich', at: hours(33) },
    { job: 'enrich', at: hours(80) },
    { job: 'enrich', at: hours(200) },
    { job: 'enrich', at: hours(420) },
  ],
};

describe('the daemon on a chained month', () => {
  it('with DF_PIPELINE_PACING, claims the second steps within seconds; today, at the idle pace', async () => {
    const today = await replayMonth({ arrivals: [], jobs: FILE, env: { DF_PIPELINE_PACING: 'false' } });
    const paced = await replayMonth({ arrivals: [], jobs: FILE, env: { DF_PIPELINE_PACING: 'true' } });
    for (const r of [today, paced]) {
      const s = summarize(r);
      expect(s.executions).toBe(8);
      expect(s.neverClaimed).toBe(0);
      expect(s.rateLimited).toBe(0);
      expect(s.exhaustedOnDay).toBeNull();
    }
    // The step is created 30 s after the report: the burst's 45 s poll claims it 15 s later.
    expect(laterStepsP95(paced)).toBe(15_000);
    expect(laterStepsP95(today)).toBeGreaterThan(30_000);
    // The job definitions are read at start and with each task list refresh (daily once matched): 30 a month.
    const jobReads = paced.requests.filter((r) => r.kind === 'other').length;
    expect(jobReads).toBe(paced.requests.filter((r) => r.kind === 'list').length);
    expect(jobReads).toBeLessThanOrEqual(31);
    // One task a job runs unannounced: its idle polls come oftener than a job-executions list would (the
    // list pays from 4 such tasks), so none is read.
    expect(paced.requests.filter((r) => r.kind === 'job-list')).toEqual([]);
  }, 120_000);
});
