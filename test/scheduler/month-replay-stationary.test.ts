// Month replays from a cold start on work whose rate does not change: Poisson arrivals alone and in pairs (p95
// and mean pickup beside the best fixed poller), and how the month's budget is spent with no work, with 50 tasks
// on a small month, and with more work than the month carries.
import { describe, expect, it } from 'vitest';
import { bestFixedInHindsight } from '../../src/replay/fixed-poller.ts';
import { replayMonth } from '../../src/replay/replay.ts';
import { summarize } from '../../src/replay/summary.ts';
import { mulberry32, workload } from '../../src/replay/workloads.ts';
import { END, figures, HOUR, poisson, REPLAY_TIMEOUT_MS, START } from './month-replay-rig.ts';

describe('a replayed month', { timeout: REPLAY_TIMEOUT_MS }, () => {
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
});
