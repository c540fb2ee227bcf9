// The month replay's baselines and figures: fixed-interval pollers, the hindsight search, the summary and the
// standard workloads, checked on cases small enough to work out by hand.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { bestByHourInHindsight, bestFixedInHindsight, fixedPoller } from '../../src/replay/fixed-poller.ts';
import {
  busiestWindow,
  byRate,
  followedMove,
  percentile,
  spentIn,
  summarize,
} from '../../src/replay/summary.ts';
import type { Arrival } from '../../src/replay/types.ts';
import { monthBounds, readArrivals, workload, WORKLOADS, writeArrivals } from '../../src/replay/workloads.ts';

const { startsAt, endsAt } = monthBounds('2026-11');
const at = (seconds: number) => startsAt + seconds * 1000;

describe('a fixed-interval poller', () => {
  it('claims each arrival at the first poll after it, one per poll, and reports it after the handler', () => {
    const arrivals: Arrival[] = [
      { task: 'a', at: at(5) },
      { task: 'a', at: at(12) },
      { task: 'a', at: at(13) },
    ];
    const result = fixedPoller(arrivals, { intervalMs: 10_000, startsAt, endsAt, handlerMs: 2_000 });
    const claims = result.claims.map((c) => [
      (c.claimedAt! - startsAt) / 1000,
      (c.reportedAt! - startsAt) / 1000,
    ]);
    // Polls at 0, 10, 20, 30 s: the one at 20 s takes the first of the two waiting, the one at 30 s the other.
    expect(claims).toEqual([
      [10, 12],
      [20, 22],
      [30, 32],
    ]);
  });

  it('with a re-poll after each hit drains a batch at once, within 5 requests a second and 50 a minute', () => {
    const batch = Array.from({ length: 100 }, (_, i): Arrival => ({ task: 'a', at: at(1) + i }));
    const result = fixedPoller(batch, { intervalMs: 60_000, startsAt, endsAt, repollAfterHit: true });
    const s = summarize(result);
    expect(s.claimed).toBe(100);
    expect(busiestWindow(result, 1_000)).toBeLessThanOrEqual(5);
    expect(busiestWindow(result, 60_000)).toBeLessThanOrEqual(50);
    // 100 claims and 100 reports at 50 a minute: all claimed within about 4 minutes of the first poll.
    expect(s.pickup.max).toBeLessThan(5 * 60_000);
  });

  it('stops at the month quota, and the hindsight search finds the smallest interval that does not run out', () => {
    const arrivals = WORKLOADS.find((w) => w.name === 'poisson-hourly')!.generate(1);
    const tight = fixedPoller(arrivals, { intervalMs: 30_000, startsAt, endsAt });
    expect(tight.requests).toHaveLength(40_000);
    expect(summarize(tight).exhaustedOnDay).toBeLessThan(30);
    const best = bestFixedInHindsight(arrivals, { startsAt, endsAt });
    const bestMs = Number(/fixed ([\d.]+) s/.exec(best.name)![1]) * 1000;
    expect(best.requests.length).toBeLessThan(40_000);
    expect(fixedPoller(arrivals, { intervalMs: bestMs - 1_000, startsAt, endsAt }).requests).toHaveLength(
      40_000,
    );
  });
});

describe('the poller that knows the hours (the reference for time-varying work)', () => {
  it('polls at the interval each instant asks for', () => {
    // One task, whose only execution comes after the window: every poll finds nothing.
    const result = fixedPoller([{ task: 'a', at: at(1_000) }], {
      intervalMs: 10_000,
      intervalAt: (t) => (t < at(60) ? 10_000 : 30_000),
      startsAt,
      endsAt: at(150),
    });
    expect(result.requests.map((r) => (r.at - startsAt) / 1000)).toEqual([
      0, 10, 20, 30, 40, 50, 60, 90, 120,
    ]);
  });

  // Searching the reference's settings replays the month many times: CPU work, which a loaded machine slows.
  it('on a weekly pattern polls quiet hours k times slower than busy ones, within the month, far below the best fixed p95', () => {
    const w = workload('weekly-pattern');
    const arrivals = w.generate(7_919);
    const result = bestByHourInHindsight(arrivals, (t) => w.ratePerHour!(t), { startsAt, endsAt });
    const s = summarize(result);
    expect(s.neverClaimed).toBe(0);
    expect(s.requests).toBeLessThan(40_000);
    const [busyS, quietS] = /by hour: ([\d.]+) s \/ ([\d.]+) s/.exec(result.name)!.slice(1).map(Number);
    // Polls that found nothing, by the rate of the hour they were sent in: their spacing is the interval.
    const spacing = (rate: number) => {
      const polls = result.requests.filter((r) => r.kind === 'poll' && r.status === 404).map((r) => r.at);
      const gaps = polls.slice(1).map((p, i) => [polls[i]!, p - polls[i]!] as const);
      const inHour = gaps.filter(
        ([from, gap]) => w.ratePerHour!(from) === rate && w.ratePerHour!(from + gap) === rate,
      );
      return inHour.map(([, gap]) => gap / 1000).sort((a, b) => a - b)[Math.floor(inHour.length / 2)];
    };
    expect(spacing(20)).toBeCloseTo(busyS!, 0);
    expect(spacing(0.5)).toBeCloseTo(quietS!, 0);
    expect(quietS!).toBeGreaterThan(2 * busyS!);
    const fixed = summarize(bestFixedInHindsight(arrivals, { startsAt, endsAt, repollAfterHit: true }));
    // Measured on this draw: 0.42.
    expect(s.pickup.p95 / fixed.pickup.p95).toBeLessThan(0.5);
    // Quiet hours polled as often as busy ones: the same as a fixed poller except for the empty hours.
    const flat = summarize(
      bestByHourInHindsight(arrivals, (t) => w.ratePerHour!(t), { startsAt, endsAt }, [1]),
    );
    expect(flat.pickup.p95).toBeGreaterThan(1.2 * s.pickup.p95);
    expect(flat.pickup.p95).toBeLessThan(fixed.pickup.p95);
  }, 120_000);

  it('on a steady rate is the best fixed poller with re-poll', () => {
    const arrivals = workload('poisson-hourly').generate(3);
    const byHour = bestByHourInHindsight(arrivals, () => 1, { startsAt, endsAt });
    const fixed = bestFixedInHindsight(arrivals, { startsAt, endsAt, repollAfterHit: true });
    const seconds = (name: string) => Number(/([\d.]+) s/.exec(name)![1]);
    // One level: no quiet hours, one interval; the two searches round it to 0.1 s from other starting points.
    expect(byHour.name).not.toContain('/');
    expect(Math.abs(seconds(byHour.name) - seconds(fixed.name))).toBeLessThanOrEqual(0.2);
    // A 0.1 s difference moves where polls fall against the arrivals, and p95 by a percent or two.
    expect(Math.abs(summarize(byHour).pickup.p95 / summarize(fixed).pickup.p95 - 1)).toBeLessThan(0.03);
  });
});

describe('the replay summary', () => {
  it('reads percentiles by nearest rank and names the day the month ran out', () => {
    expect(percentile([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 0.95)).toBe(10);
    expect(percentile([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 0.5)).toBe(5);
    expect(percentile([], 0.5)).toBeNaN();
    const requests = Array.from({ length: 10 }, (_, i) => ({
      at: at(86_400 * 2 + i),
      kind: 'poll' as const,
      status: 404,
    }));
    const s = summarize({ name: 'x', startsAt, endsAt, claims: [], requests }, 10);
    expect(s.exhaustedOnDay).toBe(3);
    expect(s.requests).toBe(10);
  });

  it("splits a month's polls, arrivals and slow pickups by the workload's rate in their hour", () => {
    // Busy 09:00-17:00 every day (10 an hour), quiet otherwise (1 an hour). A poller every 60 s in busy
    // hours and every 600 s in quiet ones, by the fixed poller's own schedule.
    const busy = (t: number) => new Date(t).getUTCHours() >= 9 && new Date(t).getUTCHours() < 17;
    const rate = (t: number) => (busy(t) ? 10 : 1);
    const arrivals: Arrival[] = [
      { task: 'a', at: at(9 * 3600 + 30) }, // busy: claimed at the poll 30 s later
      { task: 'a', at: at(3 * 3600 + 30) }, // quiet: claimed at the 03:10 poll, 570 s later
    ];
    const result = fixedPoller(arrivals, {
      intervalMs: 60_000,
      intervalAt: (t) => (busy(t) ? 60_000 : 600_000),
      startsAt,
      endsAt,
    });
    const [hot, cold] = byRate(result, rate, 100_000);
    expect(hot).toMatchObject({ ratePerHour: 10, hours: 30 * 8, arrivals: 1, slow: 0 });
    expect(cold).toMatchObject({ ratePerHour: 1, hours: 30 * 16, arrivals: 1, slow: 1 });
    // 60 polls an hour where busy, 6 where quiet (give or take the hours' edges).
    expect(hot!.polls / hot!.hours).toBeCloseTo(60, 0);
    expect(cold!.polls / cold!.hours).toBeGreaterThan(5.5);
    expect(cold!.polls / cold!.hours).toBeLessThan(6.5);
    expect(hot!.polls + cold!.polls).toBe(result.requests.filter((r) => r.kind === 'poll').length);
  });
});

describe('spentIn', () => {
  it("counts a window's polls, its arrivals, and those that waited longer than the threshold", () => {
    const day = 86_400;
    const arrivals: Arrival[] = [
      { task: 'a', at: at(30) }, // claimed at the 60 s poll: 30 s, slow over 20 s
      { task: 'a', at: at(day - 10) }, // claimed at the next day's first poll: 10 s
      { task: 'a', at: at(day + 5) }, // outside the window
    ];
    const result = fixedPoller(arrivals, { intervalMs: 60_000, startsAt, endsAt });
    // Polls at 0, 60, ... 86,340 s: 1,440 in the first day.
    expect(spentIn(result, startsAt, at(day), 20_000)).toEqual({ polls: 1_440, arrivals: 2, slow: 1 });
    expect(spentIn(result, at(day), at(2 * day), 20_000)).toEqual({ polls: 1_440, arrivals: 1, slow: 1 });
    expect(spentIn(result, startsAt, endsAt, 60_000)).toMatchObject({ arrivals: 3, slow: 0 });
  });
});

describe('followedMove', () => {
  it("takes a moving pattern's peak hours from its rate, and the p95 of the pickups that arrived in them", () => {
    const day = 86_400;
    const hour = 3_600;
    // Peaks at 10:00-11:00 on the 1st and the 2nd, then at 20:00-21:00 from the 3rd; 1 an hour elsewhere.
    const movesAt = at(2 * day);
    const rate = (t: number) => {
      const h = new Date(t).getUTCHours();
      return (t < movesAt ? h === 10 : h === 20) ? 20 : 1;
    };
    const arrivals: Arrival[] = [
      { task: 'a', at: at(10 * hour + 30) }, // old peak: claimed at the 10:01 poll, 30 s
      { task: 'a', at: at(20 * hour + 20) }, // a new peak hour while still quiet: 40 s
      { task: 'a', at: at(day + 10 * hour + 50) }, // old peak: 10 s
      { task: 'a', at: at(day + 12 * hour + 30) }, // not a peak hour
      { task: 'a', at: at(2 * day + 10 * hour + 30) }, // the old peak's hour after the move: no longer a peak
      { task: 'a', at: at(2 * day + 20 * hour + 45) }, // new peak, its first day: 15 s
    ];
    const result = fixedPoller(arrivals, { intervalMs: 60_000, startsAt, endsAt });
    expect(followedMove(result, rate, movesAt)).toEqual({
      day: { startsAt: movesAt, endsAt: at(3 * day) },
      first: { arrivals: 1, p95: 15_000 },
      oldPeaks: { arrivals: 2, p95: 30_000 },
      whileQuiet: { arrivals: 1, p95: 40_000 },
    });
    // A move within a day: the first day counted is the next whole one.
    expect(followedMove(result, rate, at(2 * day + 21 * hour)).day?.startsAt).toBe(at(3 * day));
    // No arrival in that day's peak hours: no p95.
    expect(followedMove(result, rate, at(2 * day + 21 * hour)).first).toEqual({
      arrivals: 0,
      p95: Number.NaN,
    });
  });
});

describe('the standard workloads', () => {
  it('are the same for a seed and keep to their hours and rates', () => {
    for (const w of WORKLOADS) expect(w.generate(7)).toEqual(w.generate(7));
    const business = WORKLOADS.find((w) => w.name === 'business-hours')!.generate(3);
    for (const a of business) {
      const d = new Date(a.at);
      expect(d.getUTCDay() >= 1 && d.getUTCDay() <= 5 && d.getUTCHours() >= 8 && d.getUTCHours() < 18).toBe(
        true,
      );
    }
    // 1 per 5 min over 30 days: 8,640 expected, within 4 standard deviations.
    const poisson = WORKLOADS.find((w) => w.name === 'poisson-5min')!.generate(3);
    expect(Math.abs(poisson.length - 8_640)).toBeLessThan(4 * Math.sqrt(8_640));
  });

  it('round-trip through an arrivals file, and a bad line is named', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'df-worker-arrivals-'));
    try {
      const arrivals = WORKLOADS.find((w) => w.name === 'ten-tasks')!
        .generate(5)
        .slice(0, 50);
      await writeArrivals(join(dir, 'a.jsonl'), arrivals);
      expect(await readArrivals(join(dir, 'a.jsonl'))).toEqual(arrivals);
      await writeFile(
        join(dir, 'b.jsonl'),
        '{"task":"a","at":"2026-11-01T00:00:00Z"}\n{"task":"a","at":"soon"}\n',
      );
      await expect(readArrivals(join(dir, 'b.jsonl'))).rejects.toThrow(
        /b\.jsonl:2: "at" must be an ISO 8601 instant/,
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
