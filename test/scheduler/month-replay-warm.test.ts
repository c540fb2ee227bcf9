// Month replays from a state folder: a November after an October that ended with a backlog, and what a month
// learnt kept for the next start.
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { bestFixedInHindsight } from '../../src/replay/fixed-poller.ts';
import { replayMonth } from '../../src/replay/replay.ts';
import { summarize } from '../../src/replay/summary.ts';
import { workload } from '../../src/replay/workloads.ts';
import { ArrivalProfile } from '../../src/scheduler/arrival-profile.ts';
import {
  END,
  figures,
  HOUR,
  poisson,
  replayAfterOctober,
  REPLAY_TIMEOUT_MS,
  START,
} from './month-replay-rig.ts';

describe('a replayed month', { timeout: REPLAY_TIMEOUT_MS }, () => {
  it('with more work than the month carries, from an October that ended with a backlog: claims as many as the best fixed poller', async () => {
    // October's backlog (about 1,400 executions, two days of work) is not November's: the profile knew the
    // task's arrivals only up to two days before October ended, and the first answer of November showed the
    // rest gone. Counting those two days as watched read the rate a third low, ended the overload verdict, and
    // the re-polls after it came back empty all week (186 claims fewer than the best fixed poller).
    const arrivals = workload('overload').generate(7_919);
    const f = figures(await replayAfterOctober('overload', 7_920, arrivals));
    const best = summarize(
      bestFixedInHindsight(arrivals, { startsAt: START, endsAt: END, perMonth: 40_000 }),
    );
    console.log(`overload from October: claimed ${f.claimed}, best fixed poller ${best.claimed}`);
    expect(f.claimed).toBeGreaterThanOrEqual(best.claimed);
    expect(f.polls.filter((p) => p.status === 404).length).toBeLessThan(10);
    expect(END - f.lastPollAt).toBeLessThan(HOUR);
  });

  it('keeps what it learnt across a restart, in the state folder', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'df-worker-replay-'));
    try {
      const month = await replayMonth({ arrivals: poisson(3, 600_000), stateDir: dir });
      const saved = JSON.parse(await readFile(join(dir, 'arrival-profile.json'), 'utf8')) as {
        tasks: Record<string, { all: { count: number } }>;
      };
      expect(saved.tasks.work?.all.count).toBeGreaterThan(100);
      // ... and how long the month's pickups waited, which the rest of a month restarted in its middle is
      // paced against: every claim, and those slower than a minute as they were.
      const pickups = ArrivalProfile.fromState(saved).pickups;
      const claimed = month.claims.filter((c) => c.claimedAt !== null);
      expect(pickups.count(START)).toBe(claimed.length);
      const slow = claimed.filter((c) => c.claimedAt! - c.arrivedAt >= 61_000).length;
      expect(pickups.countAbove(START, 61_000)).toBe(slow);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
