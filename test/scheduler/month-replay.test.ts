// Whole months replayed in virtual time through df-worker's own scheduling code (budget, planner, scheduler,
// reporter, client) against the emulator: what the month costs and how soon work is picked up.
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ArrivalProfile } from '../../src/scheduler/arrival-profile.ts';
import { describe, expect, it } from 'vitest';
import { bestFixedInHindsight } from '../../src/replay/fixed-poller.ts';
import { replayMonth } from '../../src/replay/replay.ts';
import { busiestWindow, followedMove, summarize } from '../../src/replay/summary.ts';
import { mulberry32, workload } from '../../src/replay/workloads.ts';
import type { Arrival, ReplayResult } from '../../src/replay/types.ts';

const START = Date.UTC(2026, 10, 1);
const END = Date.UTC(2026, 11, 1);
const HOUR = 3_600_000;

/** Poisson arrivals over November 2026 with mean gap `meanMs`, where `inside` says work may arrive. */
function poisson(seed: number, meanMs: number, inside: (t: number) => boolean = () => true): Arrival[] {
  const random = mulberry32(seed);
  const arrivals: Arrival[] = [];
  for (let t = START; ;) {
    t += -Math.log(1 - random()) * meanMs;
    if (t >= END) return arrivals;
    if (inside(t)) arrivals.push({ task: 'work', at: Math.round(t) });
  }
}

function figures(result: ReplayResult) {
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
function coldReplay(name: string, seed: number): Promise<ReplayResult> {
  const key = `${name}:${seed}`;
  let replay = coldReplays.get(key);
  if (!replay) coldReplays.set(key, (replay = replayMonth({ arrivals: workload(name).generate(seed) })));
  return replay;
}

/** November replayed by a daemon that ran through October first (drawn with `octoberSeed`), from its state folder. */
async function replayAfterOctober(
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

// A replay is CPU work alone: 1 to 5 s on a quiet machine, several times that beside busy forks and loops.
// Virtual time: a replay is CPU only, and beside busy loops (.ci/loaded-suite) a core may be a third of one.
describe('a replayed month', { timeout: 300_000 }, () => {
  // The floor is 1.1; df-worker measures 0.92-0.93 on these seeds (re-polls that would most likely come
  // back empty are skipped), so the test holds it to the goal of 1.0.
  it('on Poisson arrivals (1 per 5 min): p95 pickup at most that of the best fixed poller with re-poll, chosen in hindsight', async () => {
    for (const seed of [101, 202]) {
      const arrivals = workload('poisson-5min').generate(seed);
      const df = summarize(await replayMonth({ arrivals }));
      const best = summarize(
        bestFixedInHindsight(arrivals, { startsAt: START, endsAt: END, repollAfterHit: true }),
      );
      const ratio = df.pickup.p95 / best.pickup.p95;
      console.log(
        `poisson-5min seed ${seed}: df-worker p95 ${(df.pickup.p95 / 1000).toFixed(1)} s, mean ${(df.pickup.mean / 1000).toFixed(1)} s; ` +
          `${best.name}: p95 ${(best.pickup.p95 / 1000).toFixed(1)} s, mean ${(best.pickup.mean / 1000).toFixed(1)} s; ratio ${ratio.toFixed(3)}`,
      );
      expect(ratio).toBeLessThanOrEqual(1.0);
      expect(df.pickup.mean / best.pickup.mean).toBeLessThanOrEqual(1.05);
      expect(df.rateLimited).toBe(0);
      expect(df.requests).toBeLessThanOrEqual(40_000);
      expect(df.neverClaimed).toBeLessThanOrEqual(3);
    }
  });

  it("with no work: defers its first day's polls, spends the rest of the month evenly, to its last hour, each task within the 15-minute maximum", async () => {
    const tasks = ['a', 'b', 'c'];
    const result = await replayMonth({ arrivals: tasks.map((task) => ({ task, at: END - 1 })) });
    const f = figures(result);
    expect(f.requests).toBeLessThanOrEqual(40_000);
    expect(f.requests).toBeGreaterThan(39_500);
    expect(f.rateLimited).toBe(0);
    expect(END - f.lastPollAt).toBeLessThan(HOUR);
    const counts = tasks.map((t) => f.polls.filter((p) => p.task === t).length);
    expect(Math.max(...counts) - Math.min(...counts)).toBeLessThanOrEqual(counts[0]! / 100);
    const within = (from: number, to: number) => f.polls.filter((p) => p.at >= from && p.at < to);
    // A cold start's first hours of next to no work wait the longest interval (PollPlanner's COLD_RATE): from
    // 4 hours watched to 3% of the month (21.6 hours), every task every 15 minutes.
    for (const task of tasks) {
      const deferred = within(START + 5 * HOUR, START + 21 * HOUR).filter((p) => p.task === task);
      expect(deferred.length).toBeGreaterThanOrEqual(16 * 4 - 1);
      expect(deferred.length).toBeLessThanOrEqual(16 * 4 + 1);
    }
    // Even over the rest of the month: no day spends 10% more or less than its share of what was left.
    const rest = f.polls.length - within(START, START + 24 * HOUR).length;
    for (let day = 1; day < 30; day++) {
      const spent = within(START + day * 24 * HOUR, START + (day + 1) * 24 * HOUR);
      expect(Math.abs(spent.length - rest / 29)).toBeLessThan(rest / 290);
    }
  });

  it('with 50 tasks on a 2,000-request month: every task polled all month, the month never exceeded', async () => {
    const tasks = Array.from({ length: 50 }, (_, i) => `task-${i}`);
    const result = await replayMonth({
      arrivals: tasks.map((task) => ({ task, at: END - 1 })),
      env: { DF_BUDGET_PER_MONTH: '2000' },
    });
    const f = figures(result);
    expect(f.requests).toBeLessThanOrEqual(2_000);
    expect(END - f.lastPollAt).toBeLessThan(6 * HOUR);
    for (const task of tasks) expect(f.polls.filter((p) => p.task === task).length).toBeGreaterThan(20);
  });

  it('with more work than the month carries (1 per 2 min): keeps polling to the last hour, every poll a claim', async () => {
    // bench:pacing's third draw of its overload workload: its first hours are slow, so the rate read from them
    // crosses the overload verdict's limit back and forth.
    const arrivals = workload('overload').generate(3 * 7_919);
    const f = figures(await replayMonth({ arrivals }));
    expect(f.requests).toBeLessThanOrEqual(40_000);
    // The month is spent to its last few requests: the report reserve is 2 per execution owed a report and
    // 2 for the next claim's, not 2 per slot (which left 9 unspent).
    expect(f.requests).toBeGreaterThanOrEqual(40_000 - 4);
    expect(f.rateLimited).toBe(0);
    expect(f.perSecond).toBeLessThanOrEqual(5);
    expect(f.perMinute).toBeLessThanOrEqual(50);
    expect(END - f.lastPollAt).toBeLessThan(HOUR);
    // Each claim costs a poll and a report: all but a few dozen requests of the month went to claims, as many
    // as the best fixed poller's, which knew the rate from the start (a cold start learns it in a quarter of an
    // hour, and the verdict holds while the rate read from random arrivals hovers near it).
    expect(f.claimed).toBeGreaterThan(19_900);
    const best = summarize(
      bestFixedInHindsight(arrivals, { startsAt: START, endsAt: END, perMonth: 40_000 }),
    );
    console.log(`overload: claimed ${f.claimed}, best fixed poller ${best.claimed}`);
    expect(f.claimed).toBeGreaterThanOrEqual(best.claimed);
  });

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

  it('on work that comes in pairs (a second execution 1-5 s after each): p95 within 1.05x of the best fixed poller with re-poll', async () => {
    // Pairs break the Poisson odds behind skipping a re-poll (a hit means the other one is most likely
    // pending): skipping them anyway measured 1.19x; they are always re-polled, 1.03x.
    const random = mulberry32(1);
    const arrivals = poisson(1, 600_000).flatMap((a) => [
      a,
      { task: a.task, at: Math.min(END - 1, a.at + 1_000 + Math.round(random() * 4_000)) },
    ]);
    const df = summarize(await replayMonth({ arrivals }));
    const best = summarize(
      bestFixedInHindsight(arrivals, { startsAt: START, endsAt: END, repollAfterHit: true }),
    );
    expect(df.pickup.p95 / best.pickup.p95).toBeLessThan(1.05);
    expect(df.pickup.mean / best.pickup.mean).toBeLessThan(1.05);
    expect(df.rateLimited).toBe(0);
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
