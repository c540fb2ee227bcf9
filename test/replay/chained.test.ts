// The chained month: job runs on FIFO pipelines whose custom steps are created when the step before them
// was reported, the jobs file in the service's terms, and the chained pollers on cases worked out by hand.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { chainedPoller, shortestInHindsight } from '../../src/replay/chained-poller.ts';
import { byTaskAndStep, laterStepsP95 } from '../../src/replay/chained-summary.ts';
import { chainedWorkload, PipelineRuns, readJobsFile, type JobsFile } from '../../src/replay/jobs.ts';
import { summarize } from '../../src/replay/summary.ts';
import { monthBounds } from '../../src/replay/workloads.ts';

const { startsAt, endsAt } = monthBounds('2026-11');
const at = (seconds: number) => startsAt + seconds * 1000;

const TWO_STEPS: JobsFile = {
  jobs: [
    {
      key: 'enrich',
      pipeline: 'p',
      tasks: [
        { name: 'load', type: 'BUILTIN', durationMs: 20_000 },
        { name: 'acme/extract', type: 'SUB_WORKFLOW' },
        { name: 'wait', type: 'BUILTIN', durationMs: 30_000 },
        { name: 'acme/translate', type: 'SUB_WORKFLOW' },
        { name: 'close', type: 'BUILTIN', durationMs: 10_000 },
      ],
    },
  ],
  runs: [
    { job: 'enrich', at: at(0) },
    { job: 'enrich', at: at(5) },
  ],
};

describe('job runs on a pipeline', () => {
  it('creates each custom step when the step before it ended, and one run at a time per pipeline', () => {
    const runs = new PipelineRuns(TWO_STEPS);
    const [first] = runs.start();
    expect(first).toMatchObject({ task: 'extract', at: at(20), order: 0, run: 0 });
    // Reported at 25 s: the 30 s built-in step runs, then translate is created.
    const [second] = runs.reported(first!.id, at(25));
    expect(second).toMatchObject({ task: 'translate', at: at(55), order: 1 });
    // Reported at 60 s: close takes 10 s, the run ends at 70 s and the queued run starts then.
    const [next] = runs.reported(second!.id, at(60));
    expect(next).toMatchObject({ task: 'extract', at: at(90), run: 1, order: 0 });
  });
});

describe('the jobs file', () => {
  it('reads the service format and names what is wrong', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'dfw-jobs-'));
    try {
      const good = join(dir, 'good.json');
      await writeFile(
        good,
        JSON.stringify({
          jobs: TWO_STEPS.jobs,
          runs: [{ job: 'enrich', at: '2026-11-02T09:00:00Z' }],
        }),
      );
      const file = await readJobsFile(good);
      expect(file.runs).toEqual([{ job: 'enrich', at: Date.parse('2026-11-02T09:00:00Z') }]);
      expect(file.jobs[0]!.tasks[0]).toEqual({ name: 'load', type: 'BUILTIN', durationMs: 20_000 });
      const bad = join(dir, 'bad.json');
      await writeFile(
        bad,
        JSON.stringify({ jobs: [{ key: 'j', tasks: [{ name: 'x', type: 'BUILTIN' }] }], runs: [] }),
      );
      await expect(readJobsFile(bad)).rejects.toThrow(/jobs\[0\]\.tasks\[0\].*durationMs/);
      await writeFile(bad, JSON.stringify({ jobs: [], runs: [{ job: 'nope', at: '2026-11-02T09:00:00Z' }] }));
      await expect(readJobsFile(bad)).rejects.toThrow(/runs\[0\]\.job names no job/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('the chained pollers', () => {
  const o = { startsAt, endsAt };

  it('a fixed poller picks the second step up at its next poll, successor pacing within the burst', () => {
    const fixed = chainedPoller(TWO_STEPS, { kind: 'fixed', intervalMs: 600_000 }, o);
    const pacing = chainedPoller(TWO_STEPS, { kind: 'pacing', idleIntervalMs: 600_000 }, o);
    const waits = (r: ReturnType<typeof chainedPoller>) =>
      r.claims.map((c) => [c.task, c.step, (c.claimedAt! - c.arrivedAt) / 1000]);
    // Both poll extract every 600 s from 0 s (the fixed poller staggers translate at 300 s; pacing gives a
    // later step only its 6 h fallback): extract arrives at 20 s and is claimed at 600 s.
    expect(waits(fixed)[0]).toEqual(['extract', 0, 580]);
    expect(waits(pacing)[0]).toEqual(['extract', 0, 580]);
    // translate is created 30 s after the report at 600 s: the fixed poller next polls it at 900 s, pacing
    // at the burst's 45 s poll after the report.
    expect(waits(fixed)[1]).toEqual(['translate', 1, 270]);
    expect(waits(pacing)[1]).toEqual(['translate', 1, 15]);
  });

  it('on a seeded chained month, successor pacing cuts the later steps p95 within the same month', () => {
    const file = chainedWorkload(7, { tasks: 6, jobs: 4, pipelines: 2, runsPerHour: 0.5 });
    const fixed = chainedPoller(file, { kind: 'fixed', intervalMs: 400_000 }, o);
    const pacing = chainedPoller(file, { kind: 'pacing', idleIntervalMs: 400_000 }, o);
    const oracle = chainedPoller(file, { kind: 'oracle' }, o);
    for (const r of [fixed, pacing, oracle]) {
      const s = summarize(r);
      expect(s.rateLimited).toBe(0);
      expect(s.exhaustedOnDay).toBeNull();
      expect(s.neverClaimed).toBeLessThanOrEqual(2);
    }
    expect(laterStepsP95(pacing)).toBeLessThan(0.5 * laterStepsP95(fixed));
    expect(summarize(oracle).pickup.max).toBeLessThanOrEqual(60_000);
    // The breakdown counts each claim once, under its task and step position.
    const rows = byTaskAndStep(pacing);
    expect(rows.reduce((n, r) => n + r.claims + r.neverClaimed, 0)).toBe(pacing.claims.length);
  });

  it('chooses in hindsight the shortest interval whose month lasts', () => {
    const file = chainedWorkload(41, { tasks: 4, jobs: 3, pipelines: 2, runsPerHour: 0.2 });
    const perMonth = 3_000;
    const best = shortestInHindsight(file, (ms) => ({ kind: 'fixed', intervalMs: ms }), { ...o, perMonth });
    const intervalMs = Number(/fixed ([\d.]+) s/.exec(best.name)![1]) * 1000;
    expect(best.requests.length).toBeLessThan(perMonth);
    const shorter = chainedPoller(
      file,
      { kind: 'fixed', intervalMs: intervalMs - 1_000 },
      { ...o, perMonth },
    );
    expect(shorter.requests.length).toBe(perMonth);
  });
});
