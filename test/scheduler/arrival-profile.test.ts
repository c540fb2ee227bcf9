import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Budget } from '../../src/budget/budget.ts';
import { ManualClock } from '../../src/clock/manual-clock.ts';
import { loadConfig } from '../../src/config/index.ts';
import { plannerFromConfig } from '../../src/daemon/planner-from-config.ts';
import { ArrivalProfile } from '../../src/scheduler/arrival-profile.ts';
import { PollPlanner } from '../../src/scheduler/poll-planner.ts';
import { DEFAULT_BACKOFF } from '../../src/clock/backoff.ts';
import { loadProfile, saveProfile } from '../../src/scheduler/profile-store.ts';
import { mulberry32 } from '../../src/replay/workloads.ts';

const HOUR = 3_600_000;
const START = Date.UTC(2026, 10, 2); // a Monday

/** Watches `key` for `hours` from `from`, with Poisson arrivals at `ratePerHour(t)` (seeded), claimed at once. */
function feed(
  profile: ArrivalProfile,
  key: string,
  from: number,
  hours: number,
  ratePerHour: (t: number) => number,
  seed = 1,
): number {
  const random = mulberry32(seed);
  const end = from + hours * HOUR;
  for (let t = from; t < end; t += 60_000) {
    profile.observe([key], t);
    if (random() < ratePerHour(t) / 60) profile.arrival(key, t, t);
  }
  return end;
}

/** A planner at `now` with the production defaults, serving `tasks` (default one, 'work'). */
function plannerAt(now: number, profile?: ArrivalProfile, tasks = [{ id: 't', key: 'work' }]): PollPlanner {
  const budget = new Budget({
    limits: { perSecond: 5, perMinute: 50, perMonth: 40_000 },
    clock: new ManualClock(now),
  });
  const planner = new PollPlanner({
    budget,
    profile,
    maxPollIntervalMs: 900_000,
    errorBackoff: DEFAULT_BACKOFF,
  });
  planner.setTasks(tasks, now);
  return planner;
}

/** Poisson arrival instants at `perHour` from `from` for `hours` (seeded). */
function poissonFrom(seed: number, perHour: number, from: number, hours: number): number[] {
  const random = mulberry32(seed);
  const arrivals: number[] = [];
  for (let t = from + (-Math.log(1 - random()) / perHour) * HOUR; t < from + hours * HOUR;) {
    arrivals.push(t);
    t += (-Math.log(1 - random()) / perHour) * HOUR;
  }
  return arrivals;
}

/**
 * Polls task 't' when `planner` says, until `untilMs`, against a service that hands out the oldest pending of
 * `arrivals` (sorted) per poll; `answered` sees each answer. Returns how many were claimed and polls sent.
 */
function serveOldestFirst(
  planner: PollPlanner,
  arrivals: readonly number[],
  untilMs: number,
  answered: (t: number, claimed: number, hit: boolean) => void,
): { claimed: number; polls: number } {
  let claimed = 0;
  let polls = 0;
  for (let t = planner.next()!.nextDueAt; t < untilMs; t = Math.max(t + 1, planner.next()!.nextDueAt)) {
    polls++;
    const hit = claimed < arrivals.length && arrivals[claimed]! <= t;
    if (hit) planner.onHit('t', t, arrivals[claimed++]);
    else planner.onEmpty('t', t);
    answered(t, claimed, hit);
  }
  return { claimed, polls };
}

const businessHours = (t: number) => {
  const d = new Date(t);
  return d.getUTCDay() >= 1 && d.getUTCDay() <= 5 && d.getUTCHours() >= 8 && d.getUTCHours() < 18 ? 15 : 0;
};

/** bench:pacing's weekly pattern (arrivals an hour). */
const weekly = (t: number) => {
  const d = new Date(t);
  const h = d.getUTCHours();
  if (d.getUTCDay() === 0 || d.getUTCDay() === 6) return h >= 10 && h < 16 ? 0.5 : 0;
  if ((h >= 9 && h < 12) || (h >= 14 && h < 17)) return 20;
  return h >= 7 && h < 20 ? 2 : 0.5;
};
const NOVEMBER = Date.UTC(2026, 10, 1);

describe('ArrivalProfile', () => {
  it('learns business hours in a week: busy weekday hours read busy, nights and Sundays quiet', () => {
    const profile = new ArrivalProfile();
    const now = feed(profile, 'work', START, 7 * 24, businessHours);
    const monday10 = profile.ratePerHour('work', now + 10 * HOUR);
    const monday3 = profile.ratePerHour('work', now + 3 * HOUR);
    const sunday10 = profile.ratePerHour('work', now + 6 * 24 * HOUR + 10 * HOUR);
    expect(monday10).toBeGreaterThan(8);
    expect(monday3).toBeLessThan(monday10 / 10);
    expect(sunday10).toBeLessThan(monday10 / 10);
  });

  it('reads random arrivals at one steady rate as the same rate every hour (no hour looks busier by chance)', () => {
    const profile = new ArrivalProfile();
    const now = feed(profile, 'work', START, 14 * 24, () => 1, 7);
    const rates = Array.from({ length: 168 }, (_, h) => profile.ratePerHour('work', now + h * HOUR));
    const mean = rates.reduce((a, b) => a + b, 0) / rates.length;
    expect(mean).toBeGreaterThan(0.7);
    expect(mean).toBeLessThan(1.4);
    // Chance moves an hour's figure (an hour of the day is read from its own last passes, about 6 arrivals
    // here), but none reads under 0.3 of the mean (measured: 0.36), above the quarter under which an hour
    // counts as quiet, which it must also stay under with a standard deviation added; few read over 1.5 times
    // the mean.
    expect(Math.min(...rates)).toBeGreaterThan(0.3 * mean);
    const doubted = rates.map((_, h) => profile.ratePerHour('work', now + h * HOUR, 0, 1));
    expect(Math.min(...doubted)).toBeGreaterThan(0.25 * mean);
    expect(rates.filter((r) => r > 1.5 * mean).length).toBeLessThan(168 / 10);
  });

  it('follows work that moves to other hours within two days', () => {
    const profile = new ArrivalProfile();
    const morning = (t: number) =>
      new Date(t).getUTCHours() >= 9 && new Date(t).getUTCHours() < 12 ? 20 : 0;
    const evening = (t: number) =>
      new Date(t).getUTCHours() >= 18 && new Date(t).getUTCHours() < 23 ? 20 : 0;
    let now = feed(profile, 'work', START, 7 * 24, morning, 3); // a week of mornings
    expect(profile.ratePerHour('work', now + 2 * 24 * HOUR + 19 * HOUR)).toBeLessThan(2);
    now = feed(profile, 'work', now, 2 * 24, evening, 4); // then Monday and Tuesday: evenings
    // Wednesday evening: its hour of the week saw only quiet evenings, the hour of the day sees the change.
    // It no longer reads quiet (a quarter of the busy hours' 20 an hour)...
    const wednesday = profile.ratePerHour('work', now + 19 * HOUR);
    expect(wednesday).toBeGreaterThan(5);
    // ... and reads busier with each evening that follows.
    now = feed(profile, 'work', now, 2 * 24, evening, 5);
    expect(profile.ratePerHour('work', now + 19 * HOUR)).toBeGreaterThan(Math.max(8, wednesday));
  });

  it('reads the quiet hours of a weekly pattern from its first weekday, and the planner polls them less from the next', () => {
    // bench:pacing's weekly pattern: weekday peaks 09-12 and 14-17 (20 an hour), 2 an hour other daytime, 0.5 an
    // hour at night, quiet weekends. After a Sunday and a Monday, each night hour has seen one pass with no
    // arrival or one: against the task's overall rate (about 3 an hour) that is no surprise, and it read 2.5 an
    // hour; as part of a stretch of night hours with a handful of arrivals in all, it is.
    const profile = new ArrivalProfile();
    const tuesday = feed(profile, 'work', START - 24 * HOUR, 48, weekly, 11);
    const nights = [0, 1, 2, 3, 4, 5, 21, 22, 23].map((h) => profile.ratePerHour('work', tuesday + h * HOUR));
    expect(nights.reduce((a, b) => a + b, 0) / nights.length).toBeLessThan(1.2);
    expect(profile.ratePerHour('work', tuesday + 10 * HOUR)).toBeGreaterThan(12);
    // The week's night hours now hold a small share of its work, and wait over twice the peak's interval, which
    // is under 45 s (the month's even pace is 65 s). Measured: 2.7 times 30 s, where 1 times 57 s before.
    const planner = plannerAt(tuesday, profile);
    const peakMs = planner.idleIntervalMs(tuesday + 10 * HOUR, 'work');
    expect(peakMs).toBeLessThan(45_000);
    for (const h of [1, 3, 21, 23]) {
      expect(planner.idleIntervalMs(tuesday + h * HOUR, 'work')).toBeGreaterThan(2 * peakMs);
    }
  });

  it('polls the peaks a tenth more often than the hours beside them, and quiet hours in inverse proportion to their rates', () => {
    // Three weeks of bench:pacing's weekly pattern, planned for the fourth Monday. Intervals are read an hour
    // apart (each from a plan made then, a week before the month's end: an hour later moves them by under 1%).
    const profile = new ArrivalProfile();
    const now = feed(profile, 'work', START, 21 * 24, weekly, 5);
    const planner = plannerAt(now, profile);
    const monday = now + 24 * HOUR;
    const intervalAt = (h: number) => planner.idleIntervalMs(monday + h * HOUR, 'work');
    // The peaks (20 an hour) against the hours of 2 an hour next to them: the busiest hours are polled 1.1
    // times as often as the common interval, so that its drift over the month leaves their pickups under the
    // month's p95. Measured: 6.8 s at 11:00 and 7.4 s at 12:00, 6.3 s at 16:00 and 6.9 s at 17:00.
    for (const [peak, beside] of [
      [11, 12],
      [16, 17],
    ] as const) {
      expect(intervalAt(peak) / intervalAt(beside)).toBeGreaterThan(0.87);
      expect(intervalAt(peak) / intervalAt(beside)).toBeLessThan(0.94);
    }
    // Night hours (0.5 an hour, read 0.35-0.6) wait in inverse proportion to their rates, between the common
    // interval and the 15-minute floor: interval × rate is the same. Measured: 45.1 s at 0.562 and 51.5 s at
    // 0.492 an hour; 32.3 s at 0.621 and 57.0 s at 0.351.
    const mean = profile.meanRatePerHour();
    const product = (h: number) => intervalAt(h) * profile.ratePerHour('work', monday + h * HOUR, mean);
    for (const [a, b] of [
      [3, 4],
      [22, 23],
    ] as const) {
      expect(intervalAt(a)).toBeGreaterThan(2 * intervalAt(12));
      expect(intervalAt(b)).toBeGreaterThan(2 * intervalAt(12));
      expect(product(a) / product(b)).toBeGreaterThan(0.97);
      expect(product(a) / product(b)).toBeLessThan(1.03);
    }
  });

  it("plans quiet hours against the month's pickups: when they already used the slow 5%, nights wait less and the peaks' interval grows", () => {
    // Two weeks of the weekly pattern learnt, in November: how long the month's pickups waited so far decides
    // how much of the work to come may wait longer than the common interval.
    const learnt = () => {
      const profile = new ArrivalProfile();
      return { profile, now: feed(profile, 'work', START, 14 * 24, weekly, 21) };
    };
    // The peaks' interval, and the polls a week of night hours (0.5 an hour) gets.
    const intervals = (profile: ArrivalProfile, now: number) => {
      const planner = plannerAt(now, profile);
      let nightPolls = 0;
      for (let h = 0; h < 168; h++) {
        const at = now + h * HOUR;
        if (weekly(at) === 0.5) nightPolls += HOUR / planner.idleIntervalMs(at, 'work');
      }
      return { peakMs: planner.idleIntervalMs(now + 10 * HOUR, 'work'), nightPolls };
    };
    const asPlanned = learnt();
    for (let i = 0; i < 1_000; i++) asPlanned.profile.pickups.add(NOVEMBER, (i % 10) * 1_000);
    const slowMonth = learnt();
    for (let i = 0; i < 1_000; i++)
      slowMonth.profile.pickups.add(NOVEMBER, i < 60 ? 600_000 : (i % 10) * 1_000);
    const lastMonth = learnt();
    for (let i = 0; i < 1_000; i++)
      lastMonth.profile.pickups.add(Date.UTC(2026, 9, 1), i < 60 ? 600_000 : 1_000);
    const a = intervals(asPlanned.profile, asPlanned.now);
    const b = intervals(slowMonth.profile, slowMonth.now);
    const c = intervals(lastMonth.profile, lastMonth.now);
    const fresh = learnt();
    // Measured: with the month's pickups on plan (none slow), the peaks every 15.2 s and 3,888 polls a week of
    // nights, where 15.7 s with no pickup yet (no room earned); once 6% of them waited 10 minutes, 16.2 s and
    // 4,713 polls. October's pickups count for nothing in November.
    expect(a.peakMs).toBeLessThan(c.peakMs);
    expect(b.nightPolls).toBeGreaterThan(1.15 * a.nightPolls);
    expect(b.peakMs).toBeGreaterThan(1.04 * a.peakMs);
    expect(c).toEqual(intervals(fresh.profile, fresh.now));
  });

  it('polls a quiet hour at the common interval while more work comes than planned, from the hour before, until it stops', () => {
    const profile = new ArrivalProfile();
    const monday = feed(profile, 'work', START, 14 * 24, weekly, 22);
    const night = monday + 2 * HOUR;
    const planner = plannerAt(night, profile);
    const peakMs = planner.idleIntervalMs(monday + 10 * HOUR, 'work');
    const threeMs = planner.idleIntervalMs(night + HOUR, 'work');
    expect(threeMs).toBeGreaterThan(2 * peakMs);
    // Work moved to the night: one every 2 minutes from 02:00 to 03:00, where 0.5 an hour came, each claimed
    // 30 s after it came. The hour learns from what came in it; 03:00, next to it, would still read quiet.
    let now = night;
    for (let i = 1; i <= 30; i++) {
      now = night + i * 120_000;
      planner.onHit('t', now, now - 30_000);
    }
    // Measured: 03:00 polled every 19.5 s (the common interval, grown with the work; the peaks' is 1.1 times
    // shorter, 14.6 s before), where 69 s as planned: in the half hour before it, 15 arrivals came where its
    // planned rate brings one at most.
    expect(planner.idleIntervalMs(now + 1_000, 'work')).toBeLessThan(1.4 * peakMs);
    expect(planner.idleIntervalMs(now + 10 * 60_000, 'work')).toBeLessThan(1.4 * peakMs);
    // Half an hour after the last of them, the night is as quiet as planned.
    expect(planner.idleIntervalMs(now + 31 * 60_000, 'work')).toBeGreaterThan(2 * peakMs);
  });

  it('tells work that comes in pairs or batches from random work that happens to come close together', () => {
    const random = (seed: number, rate: number) => {
      const profile = new ArrivalProfile();
      feed(profile, 'work', START, 7 * 24, () => rate, seed);
      return profile;
    };
    // Random arrivals at 12 and 60 an hour: chance alone puts some within seconds of each other.
    expect(random(8, 12).clustered('work')).toBe(false);
    expect(random(9, 60).clustered('work')).toBe(false);
    // The same 12 an hour as 6 pairs, each second one 2 s after the first.
    const pairs = new ArrivalProfile();
    const draw = mulberry32(10);
    for (let t = START; t < START + 7 * 24 * HOUR; t += 60_000) {
      pairs.observe(['work'], t);
      if (draw() < 6 / 60) {
        pairs.arrival('work', t, t);
        pairs.arrival('work', t + 2_000, t + 2_000);
      }
    }
    expect(pairs.clustered('work')).toBe(true);
  });

  it('survives the state folder: saved and loaded, every hour reads the same, and the planner starts from it', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'df-worker-profile-'));
    try {
      const profile = new ArrivalProfile();
      const now = feed(profile, 'work', START, 7 * 24, businessHours);
      await saveProfile(dir, profile);
      const loaded = await loadProfile(dir);
      expect(loaded.result).toBe('restored');
      for (let h = 0; h < 168; h++) {
        expect(loaded.profile.ratePerHour('work', now + h * HOUR)).toBeCloseTo(
          profile.ratePerHour('work', now + h * HOUR),
          9,
        );
      }
      const config = loadConfig({ env: { DF_STATE_DIR: dir } });
      const clock = new ManualClock(now);
      const budget = new Budget({ limits: config.budget, clock });
      const { planner } = await plannerFromConfig(config, budget);
      planner.setTasks([{ id: 't', key: 'work' }], now);
      // A restart on a Sunday: the task is polled at the floor, and as soon as Monday's business hours begin.
      const sunday = now + 6 * 24 * HOUR + 10 * HOUR;
      const mondayMorning = now + 7 * 24 * HOUR + 10 * HOUR;
      expect(planner.idleIntervalMs(sunday, 'work')).toBe(config.scheduler.maxPollIntervalMs);
      expect(planner.idleIntervalMs(mondayMorning, 'work')).toBeLessThan(40_000);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('does not take an hour that stayed empty by chance for a quiet one: steady work is polled alike in every hour', () => {
    // Steady work at 1 an hour, of which the weekends' 03:00 hours happened to get none in four weeks (as, at
    // that rate, a few of the week's 168 hours do by chance): read as quiet they would wait the 15-minute
    // floor. Their neighbouring hours' arrivals, and the doubt of so few, keep them from reading quiet.
    const profile = new ArrivalProfile();
    const weekendThree = (t: number) =>
      [0, 6].includes(new Date(t).getUTCDay()) && new Date(t).getUTCHours() === 3;
    const now = feed(profile, 'work', START, 14 * 24, (t) => (weekendThree(t) ? 0 : 1), 7);
    const saturday3 = now + 5 * 24 * HOUR + 3 * HOUR;
    const mean = Array.from({ length: 168 }, (_, h) => profile.ratePerHour('work', now + h * HOUR)).reduce(
      (a, b) => a + b / 168,
      0,
    );
    expect(profile.ratePerHour('work', saturday3, 0, 1)).toBeGreaterThan(0.25 * mean);
    const planner = plannerAt(now, profile);
    const saturday4 = saturday3 + HOUR;
    const ratio = planner.idleIntervalMs(saturday3, 'work') / planner.idleIntervalMs(saturday4, 'work');
    expect(ratio).toBeGreaterThan(0.95);
    expect(ratio).toBeLessThan(1.05);
    expect(planner.idleIntervalMs(saturday3, 'work')).toBeLessThan(120_000);

    // Where no work comes for real (business hours' nights and weekends), the doubt changes nothing.
    const business = new ArrivalProfile();
    const later = feed(business, 'work', START, 7 * 24, businessHours);
    const busy = business.ratePerHour('work', later + 10 * HOUR);
    expect(business.ratePerHour('work', later + 3 * HOUR, 0, 1)).toBeLessThan(0.25 * busy);
    expect(business.ratePerHour('work', later + 6 * 24 * HOUR + 10 * HOUR, 0, 1)).toBeLessThan(0.25 * busy);
  });

  it('concludes overload within a quarter of an hour from a cold start, though the first minutes read a low rate', () => {
    // Work at 30 an hour is more than 40,000 requests a month carry (a poll and a report each), but its first
    // quarter of an hour brought 5 (20 an hour, which the month would carry). Until overload is concluded each
    // hit is re-polled, and under overload that re-poll comes back empty: a request that claims nothing. The
    // doubt of a count of 5 is what tells, from the 10th minute on.
    const planner = plannerAt(START);
    for (let minute = 0; minute <= 15; minute++) {
      const t = START + minute * 60_000;
      if (minute % 3 === 1) planner.onHit('t', t, t - 30_000);
      else planner.onEmpty('t', t);
    }
    expect(planner.profile.overallRatePerHour('work')).toBeLessThan(40_000 / 2 / (30 * 24));
    expect(planner.overloaded(START + 15 * 60_000)).toBe(true);
  });

  it('counts time as watched only as far as the arrivals are known: to the claimed createdAt, to an empty poll', () => {
    const profile = new ArrivalProfile();
    profile.observe(['work'], START);
    // A claim at 00:50 of an execution created at 00:20: what came after 00:20 may still be waiting.
    profile.observe(['work'], START + 50 * 60_000, START + 20 * 60_000);
    expect(profile.watchedMs('work')).toBeCloseTo(20 * 60_000, -3);
    // An error answers nothing; an empty poll at 01:00 tells every arrival up to it.
    profile.observe(['work'], START + 55 * 60_000, -Infinity);
    expect(profile.watchedMs('work')).toBeCloseTo(20 * 60_000, -3);
    profile.observe(['work'], START + HOUR);
    const watched = profile.watchedMs('work');
    expect(watched).toBeCloseTo(HOUR, -4);
    // Two hours without a poll (the daemon was not running) count for no task: one minute after it, only that.
    profile.observe(['work'], START + 3 * HOUR + 1);
    profile.observe(['work'], START + 3 * HOUR + 60_001);
    expect(profile.watchedMs('work') - watched).toBeLessThan(60_000);
    expect(profile.watchedMs('work') - watched).toBeGreaterThan(0);
    // A backlog: for two hours, each poll (every 10 minutes) claims an execution created 3 h + 1 min in. An
    // answer newer than the last poll then shows the rest gone (claimed by another client, or cancelled): that
    // was no quiet time, and of the two hours unknown only the 2 minutes since the last poll are counted.
    const backlogFrom = START + 3 * HOUR + 60_001;
    for (let k = 1; k <= 12; k++)
      profile.observe(['work'], backlogFrom + k * 600_000, backlogFrom + k * 1_000);
    const before = profile.watchedMs('work');
    profile.observe(['work'], backlogFrom + 2 * HOUR + 120_000);
    expect(profile.watchedMs('work') - before).toBeGreaterThan(100_000);
    expect(profile.watchedMs('work') - before).toBeLessThan(130_000);
  });

  it('reads a backlog as work still waiting, not as quiet hours: under overload the rate and the verdict hold', () => {
    // 30 an hour at random, more than the month carries: the planner polls as it plans (no re-poll, a young
    // hit put off), the service hands out the oldest pending execution, and a backlog builds. A claim tells the
    // arrivals only up to its createdAt: counting the time after it as watched read 19 an hour within five
    // hours, ended the overload, and the re-polls that followed drained the backlog and came back empty.
    const planner = plannerAt(START);
    const arrivals = poissonFrom(5, 30, START, 12);
    const { claimed, polls } = serveOldestFirst(planner, arrivals, START + 12 * HOUR, (t) => {
      if (t > START + HOUR) expect(planner.overloaded(t)).toBe(true);
      if (t > START + 6 * HOUR) expect(planner.profile.overallRatePerHour('work')).toBeGreaterThan(25);
    });
    expect(arrivals.length - claimed).toBeGreaterThan(10);
    expect(polls - claimed).toBeLessThan(20);
  });

  it('reads no overload in the seconds after a start: executions queued one after another are each re-polled', () => {
    // Someone trying a handler queues three executions 12 s apart (each its own group) within 30 s of the
    // start: three arrivals in half a minute, at two standard deviations, is a rate no month carries.
    const planner = plannerAt(START);
    planner.onEmpty('t', START);
    for (const s of [12, 24]) {
      const t = START + s * 1_000;
      planner.onHit('t', t, t - 500);
      expect(planner.overloaded(t)).toBe(false);
      expect(planner.next()!.nextDueAt).toBe(t);
      planner.onEmpty('t', t + 100);
    }
  });

  it('revisits an overload read from a first arrival within 5 minutes: time without more tells too', () => {
    // One arrival in the first 3 minutes could be 20 an hour or more (overload, at two standard deviations);
    // none in the half hour after it is not.
    const planner = plannerAt(START);
    const overloadedAt: number[] = [];
    for (let minute = 0; minute <= 30; minute++) {
      const t = START + minute * 60_000;
      if (minute === 3) planner.onHit('t', t, t - 30_000);
      else planner.onEmpty('t', t);
      if (planner.overloaded(t)) overloadedAt.push(minute);
    }
    expect(overloadedAt[0]).toBe(3);
    expect(Math.max(...overloadedAt)).toBeLessThan(10);
  });

  it('drains a backlog found at start by re-polls, and learns no rate from it', () => {
    // 100 executions waited when the daemon started (created over the 3 hours before), then 12 an hour come.
    // What waited is no arrival in time watched: counted, it read 60 an hour two hours in, concluded overload
    // (each hit then waits for the idle pace) and polled a quarter as often as the month affords.
    const planner = plannerAt(START);
    const waiting = Array.from({ length: 100 }, (_, i) => START - 3 * HOUR + i * 100_000);
    const arrivals = [...waiting, ...poissonFrom(3, 12, START, 3)];
    const { claimed, polls } = serveOldestFirst(planner, arrivals, START + 3 * HOUR, (t, claimed, hit) => {
      // The backlog is drained at once, a re-poll after each hit.
      if (hit && claimed === 100) expect(t).toBeLessThan(START + 1_000);
      // A first arrival minutes into the watch may read as overload; the doubt has faded within the hour.
      if (t > START + HOUR) expect(planner.overloaded(t)).toBe(false);
    });
    expect(planner.profile.overallRatePerHour('work')).toBeLessThan(20);
    expect(polls - claimed).toBeGreaterThan(100);
  });

  it('does not conclude overload on many quiet tasks from their first minutes: their doubts are not added up', () => {
    // 20 tasks, 6 executions an hour in all, which the month carries many times over. Each task's rate, read
    // from a minute or two, is uncertain; the sum of 20 such rates is much less so. Each task is polled every
    // minute, one after the other (3 s apart), as the daemon sends them. The first arrival (at 7 minutes) may
    // read as overload; time without more says otherwise, and the verdict is revisited within 5 minutes.
    const tasks = Array.from({ length: 20 }, (_, i) => ({ id: `t${i}`, key: `k${i}` }));
    const planner = plannerAt(START, undefined, tasks);
    const random = mulberry32(11);
    const overloadedAt = new Set<number>();
    for (let minute = 0; minute <= 30; minute++) {
      tasks.forEach((task, i) => {
        const t = START + minute * 60_000 + i * 3_000;
        if (random() < 6 / 60 / 20) planner.onHit(task.id, t, t - 10_000);
        else planner.onEmpty(task.id, t);
        if (planner.overloaded(t)) overloadedAt.add(minute);
      });
    }
    expect(overloadedAt.size).toBeLessThanOrEqual(6);
    expect(Math.max(-1, ...overloadedAt)).toBeLessThan(15);
  });

  it('starts afresh from a damaged file, saying so', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'df-worker-profile-'));
    try {
      await writeFile(join(dir, 'arrival-profile.json'), '{"version": 1, "tasks": {"work": {"week": []}}}');
      const loaded = await loadProfile(dir);
      expect(loaded.result).toBe('unreadable');
      expect(loaded.problem).toMatch(/arrival-profile\.json/);
      expect(loaded.profile.ratePerHour('work', START)).toBe(0);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
