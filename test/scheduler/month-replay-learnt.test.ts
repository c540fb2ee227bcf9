// Month replays of what is learnt: work that varies by hour and day (business hours, a weekly pattern, a
// pattern that moves), cold and from October, and the state folder a November after an October starts from.
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { bestFixedInHindsight } from '../../src/replay/fixed-poller.ts';
import { replayMonth } from '../../src/replay/replay.ts';
import { followedMove, summarize } from '../../src/replay/summary.ts';
import { workload } from '../../src/replay/workloads.ts';
import { ArrivalProfile } from '../../src/scheduler/arrival-profile.ts';
import {
  coldReplay,
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

  it('learns business hours within days: p95 pickup well under the even pace, Sundays at the 15-minute floor', async () => {
    const business = (t: number) => {
      const d = new Date(t);
      return d.getUTCDay() >= 1 && d.getUTCDay() <= 5 && d.getUTCHours() >= 8 && d.getUTCHours() < 18;
    };
    const f = figures(await replayMonth({ arrivals: poisson(5, 240_000, business) }));
    expect(f.neverClaimed).toBe(0);
    expect(f.rateLimited).toBe(0);
    // An even spend polls every ~75 s, whose p95 is ~71 s; what is learnt is spent in business hours.
    expect(f.p95).toBeLessThan(45_000);
    const pollsIn = (day: number, fromHour: number, toHour: number) =>
      f.polls.filter(
        (p) => p.at >= Date.UTC(2026, 10, day, fromHour) && p.at < Date.UTC(2026, 10, day, toHour),
      ).length;
    const evenPerHour = f.polls.length / 720;
    // The last Sunday is polled at the 15-minute floor; the last Monday's business hours half again as often
    // as an even spend would (the last day's share is what the month left; earlier weekdays get more).
    expect(pollsIn(29, 0, 24)).toBeLessThanOrEqual(24 * 4 + 2);
    expect(pollsIn(30, 8, 18) / 10).toBeGreaterThan(1.5 * evenPerHour);
  });

  // From a cold start, the first days spent learning included. Measured on this seed: 0.475 on the weekly
  // pattern and 0.492 on its move (0.472 and 0.500 before a surge stayed through a lull). Before: 0.518 and 0.537 before the cold start's first quiet hours were
  // deferred; 0.515 and 0.556 with 4% of the work to come slow whatever the month's pickups did, and no quiet
  // hour polled at the common interval when work came in it; 0.56 and 0.56 with an hour of the day lifted
  // towards its neighbours until it differed by two standard deviations, and quiet hours 6% of the work; 0.67
  // and 0.71 with an hour of the day leaning on the overall rate rather than its neighbours; 0.70 on the weekly
  // pattern before that, 0.77 before re-polls of forecast work were let run ahead of the even spend, 0.85 before
  // quiet hours took 6% of the work and hour-of-day figures faded by pass.
  it.each([
    ['weekly-pattern', 0.5],
    ['pattern-change', 0.55],
  ])(
    'on %s (peaks, quiet nights and weekends): p95 pickup under %sx the best fixed poller with re-poll',
    async (name, bound) => {
      const arrivals = workload(name).generate(101);
      const df = summarize(await coldReplay(name, 101));
      const best = summarize(
        bestFixedInHindsight(arrivals, { startsAt: START, endsAt: END, repollAfterHit: true }),
      );
      const ratio = df.pickup.p95 / best.pickup.p95;
      console.log(`${name} seed 101: p95 ratio ${ratio.toFixed(3)}`);
      expect(ratio).toBeLessThan(bound);
      expect(df.neverClaimed).toBe(0);
      expect(df.rateLimited).toBe(0);
    },
  );

  // Measured on this seed: 33.9 s on the new peaks' first day (35.5 s before a surge stayed through a lull),
  // 29.1 s in the old peaks' last week, and 239 s in the new peak hours' last week while they were quiet
  // (bench:pacing prints the same for its draws).
  it('follows a pattern that moves from its first day: the new peak hours wait as the old ones did, not as quiet hours', async () => {
    const w = workload('pattern-change');
    const result = await coldReplay('pattern-change', 101);
    const { day, first, oldPeaks, whileQuiet } = followedMove(result, (t) => w.ratePerHour!(t), w.movesAt!());
    expect(new Date(day!.startsAt).toISOString()).toBe('2026-11-16T00:00:00.000Z');
    console.log(
      `pattern change seed 101: new peaks' first day p95 ${(first.p95 / 1000).toFixed(1)} s (${first.arrivals} arrivals), ` +
        `old peaks' last week ${(oldPeaks.p95 / 1000).toFixed(1)} s, new peak hours while quiet ${(whileQuiet.p95 / 1000).toFixed(1)} s`,
    );
    expect(first.arrivals).toBeGreaterThan(50);
    expect(first.p95).toBeLessThan(1.3 * oldPeaks.p95);
    expect(whileQuiet.p95).toBeGreaterThan(3 * first.p95);
  });

  // Warm: what October taught it, kept in the state folder as a restart keeps it. Measured on this seed: 0.441
  // (0.473 in an earlier design; 0.490 with 4% of the work to come slow whatever the month's pickups did; 0.522
  // when an hour of the day was lifted towards its neighbours and nights were polled 3 times slower than busy
  // hours, not 4-5); pattern change is not held to the half (see .github/CONTRIBUTING.md).
  it('on the weekly pattern, from what it learnt in October: p95 pickup at most half the best fixed poller with re-poll', async () => {
    const arrivals = workload('weekly-pattern').generate(101);
    const df = summarize(await replayAfterOctober('weekly-pattern', 102, arrivals));
    const best = summarize(
      bestFixedInHindsight(arrivals, { startsAt: START, endsAt: END, repollAfterHit: true }),
    );
    const ratio = df.pickup.p95 / best.pickup.p95;
    console.log(`weekly-pattern seed 101, October learnt: p95 ratio ${ratio.toFixed(3)}`);
    expect(ratio).toBeLessThanOrEqual(0.5);
    expect(df.neverClaimed).toBe(0);
    expect(df.rateLimited).toBe(0);
    expect(df.exhaustedOnDay).toBeNull();
  });
});
