// bench:month on a chained month (--jobs FILE.json, or --chained NAME [--seed N]): today's planner (the
// daemon itself, replayed), the best fixed poller in hindsight, an oracle that knows each step's arrival to
// the minute, and successor pacing in the simulation (with idle polls of the jobs' first steps, and with a
// job-executions list standing in for them), side by side on the same runs.
import { chainedPoller, shortestInHindsight } from '../src/replay/chained-poller.ts';
import { byTaskAndStep, laterStepsP95 } from '../src/replay/chained-summary.ts';
import type { JobsFile } from '../src/replay/jobs.ts';
import { replayMonth } from '../src/replay/replay.ts';
import { summarize } from '../src/replay/summary.ts';
import type { ReplayResult } from '../src/replay/types.ts';
import { monthBounds } from '../src/replay/workloads.ts';

export async function compareChained(
  file: JobsFile,
  month: string,
  env: Record<string, string | undefined>,
): Promise<ReplayResult[]> {
  const o = monthBounds(month);
  const today = await replayMonth({
    arrivals: [],
    jobs: file,
    month,
    env: { ...env, DF_PIPELINE_PACING: 'false' },
  });
  const paced = await replayMonth({
    arrivals: [],
    jobs: file,
    month,
    env: { ...env, DF_PIPELINE_PACING: 'true' },
  });
  const unlisted = await replayMonth({
    arrivals: [],
    jobs: file,
    month,
    env: { ...env, DF_PIPELINE_PACING: 'true', DF_PIPELINE_JOB_LIST: 'false' },
  });
  return [
    { ...today, name: "today's planner" },
    { ...unlisted, name: 'df-worker, pacing without the job list' },
    { ...paced, name: 'df-worker, DF_PIPELINE_PACING' },
    { ...shortestInHindsight(file, (ms) => ({ kind: 'fixed', intervalMs: ms }), o), name: 'best fixed' },
    chainedPoller(file, { kind: 'oracle' }, o),
    shortestInHindsight(file, (ms) => ({ kind: 'pacing', idleIntervalMs: ms }), o),
    {
      ...shortestInHindsight(file, (ms) => ({ kind: 'pacing', idleIntervalMs: 0, listIntervalMs: ms }), o),
      name: 'successor pacing + job list',
    },
  ];
}

const s = (ms: number) => (Number.isFinite(ms) ? `${(ms / 1000).toFixed(1)} s` : '-');

export function printChained(results: readonly ReplayResult[], json: boolean): void {
  if (json) {
    const out = results.map((r) => ({
      name: r.name,
      summary: summarize(r),
      laterStepsP95Ms: laterStepsP95(r),
      byTaskAndStep: byTaskAndStep(r),
    }));
    console.log(
      JSON.stringify(out, (_, v: unknown) => (typeof v === 'number' && !Number.isFinite(v) ? null : v)),
    );
    return;
  }
  const baseline = results[0]!;
  const base = summarize(baseline);
  const baseLater = laterStepsP95(baseline);
  for (const r of results) {
    const sum = summarize(r);
    const later = laterStepsP95(r);
    const lists = r.requests.filter((q) => q.kind === 'job-list').length;
    console.log(
      `${r.name.padEnd(44)} ${String(sum.executions).padStart(5)} executions, ${sum.neverClaimed} never claimed; ` +
        `p50 ${s(sum.pickup.p50)}, p95 ${s(sum.pickup.p95)} (${(sum.pickup.p95 / base.pickup.p95).toFixed(2)}x); ` +
        `later steps p95 ${s(later)} (${(later / baseLater).toFixed(2)}x); ` +
        `${sum.requests} requests${lists > 0 ? ` (${lists} job lists)` : ''}, ${sum.rateLimited} x 429, ` +
        (sum.exhaustedOnDay === null ? 'month lasted' : `ran out on day ${sum.exhaustedOnDay}`),
    );
  }
}
