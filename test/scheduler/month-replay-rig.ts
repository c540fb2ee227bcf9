// What the month-replay files share: November 2026, Poisson draws, a replay's figures, cold replays read by
// several tests, and a November replayed after an October. The month replays are split into files by what they
// show, so that forks run them side by side: each replay is seconds of CPU, the whole set a minute on one core.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { replayMonth } from '../../src/replay/replay.ts';
import { busiestWindow, summarize } from '../../src/replay/summary.ts';
import { mulberry32, workload } from '../../src/replay/workloads.ts';
import type { Arrival, ReplayResult } from '../../src/replay/types.ts';

export const START = Date.UTC(2026, 10, 1);
export const END = Date.UTC(2026, 11, 1);
export const HOUR = 3_600_000;

/**
 * A replay is CPU work alone: 1 to 5 s on a quiet machine, several times that beside busy forks and loops
 * (.ci/loaded-suite), where a core may be a third of one.
 */
export const REPLAY_TIMEOUT_MS = 300_000;

/** Poisson arrivals over November 2026 with mean gap `meanMs`, where `inside` says work may arrive. */
export function poisson(
  seed: number,
  meanMs: number,
  inside: (t: number) => boolean = () => true,
): Arrival[] {
  const random = mulberry32(seed);
  const arrivals: Arrival[] = [];
  for (let t = START; ;) {
    t += -Math.log(1 - random()) * meanMs;
    if (t >= END) return arrivals;
    if (inside(t)) arrivals.push({ task: 'work', at: Math.round(t) });
  }
}

export function figures(result: ReplayResult) {
  const summary = summarize(result);
  return {
    claimed: summary.claimed,
    neverClaimed: summary.neverClaimed,
    p95: summary.pickup.p95,
    requests: summary.requests,
    rateLimited: summary.rateLimited,
    lastPollAt: summary.lastPollAt ?? 0,
    perSecond: busiestWindow(result, 1_000),
    perMinute: busiestWindow(result, 60_000),
    polls: result.requests.filter((r) => r.kind === 'poll'),
  };
}

/** Cold replays of a standard workload's draw, shared by the tests that read them. */
const coldReplays = new Map<string, Promise<ReplayResult>>();
export function coldReplay(name: string, seed: number): Promise<ReplayResult> {
  const key = `${name}:${seed}`;
  let replay = coldReplays.get(key);
  if (!replay) coldReplays.set(key, (replay = replayMonth({ arrivals: workload(name).generate(seed) })));
  return replay;
}

/** November replayed by a daemon that ran through October first (drawn with `octoberSeed`), from its state folder. */
export async function replayAfterOctober(
  name: string,
  octoberSeed: number,
  arrivals: Arrival[],
): Promise<ReplayResult> {
  const dir = await mkdtemp(join(tmpdir(), 'df-worker-replay-'));
  try {
    const october = workload(name).generate(octoberSeed, '2026-10');
    await replayMonth({ arrivals: october, month: '2026-10', stateDir: dir });
    return await replayMonth({ arrivals, stateDir: dir });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
