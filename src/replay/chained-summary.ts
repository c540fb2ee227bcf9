// What a chained month comes to: pickup by custom step position (a job's first step arrives unannounced,
// the later ones after a report of ours), and per task and step position the claims, p50/p95 pickup,
// requests and 429s, as `bench:month --jobs FILE --json` prints them.
import { percentile } from './summary.ts';
import type { ReplayResult } from './types.ts';

export interface StepFigures {
  task: string;
  /** Which custom step of its job (0 for the first); `requests` and `rateLimited` are the task's own. */
  step: number;
  claims: number;
  neverClaimed: number;
  /** Pickup percentiles of the claimed, in ms (NaN when none was). */
  p50: number;
  p95: number;
  requests: number;
  rateLimited: number;
}

/** Figures per task and step position, ordered by task then step. */
export function byTaskAndStep(result: ReplayResult): StepFigures[] {
  const groups = new Map<string, { task: string; step: number; waits: number[]; never: number }>();
  for (const c of result.claims) {
    const step = c.step ?? 0;
    const key = `${c.task}\u0000${step}`;
    const group = groups.get(key) ?? { task: c.task, step, waits: [], never: 0 };
    if (c.claimedAt === null) group.never++;
    else group.waits.push(c.claimedAt - c.arrivedAt);
    groups.set(key, group);
  }
  const requests = new Map<string, { sent: number; refused: number }>();
  for (const r of result.requests) {
    if (r.task === undefined) continue;
    const tally = requests.get(r.task) ?? { sent: 0, refused: 0 };
    if (r.status === 429) tally.refused++;
    else tally.sent++;
    requests.set(r.task, tally);
  }
  return [...groups.values()]
    .sort((a, b) => (a.task === b.task ? a.step - b.step : a.task < b.task ? -1 : 1))
    .map((g) => {
      g.waits.sort((a, b) => a - b);
      return {
        task: g.task,
        step: g.step,
        claims: g.waits.length,
        neverClaimed: g.never,
        p50: percentile(g.waits, 0.5),
        p95: percentile(g.waits, 0.95),
        requests: requests.get(g.task)?.sent ?? 0,
        rateLimited: requests.get(g.task)?.refused ?? 0,
      };
    });
}

/** p95 pickup (ms) of the claimed executions that are a second or later custom step of their job. */
export function laterStepsP95(result: ReplayResult): number {
  const waits = result.claims
    .filter((c) => (c.step ?? 0) > 0 && c.claimedAt !== null)
    .map((c) => c.claimedAt! - c.arrivedAt)
    .sort((a, b) => a - b);
  return percentile(waits, 0.95);
}
