import { describe, expect, it } from 'vitest';
import { Budget } from '../../src/budget/budget.ts';
import { DEFAULT_BACKOFF } from '../../src/clock/backoff.ts';
import { ManualClock } from '../../src/clock/manual-clock.ts';
import { ArrivalProfile } from '../../src/scheduler/arrival-profile.ts';
import { PollPlanner } from '../../src/scheduler/poll-planner.ts';
import { mulberry32 } from '../../src/replay/workloads.ts';

const HOUR = 3_600_000;

function setup(taskCount = 2, start = Date.UTC(2026, 10, 1)) {
  const clock = new ManualClock(start);
  const budget = new Budget({ limits: { perSecond: 5, perMinute: 50, perMonth: 40_000 }, clock });
  const planner = new PollPlanner({
    budget,
    maxPollIntervalMs: 900_000,
    errorBackoff: { baseMs: 1_000, maxMs: 300_000, random: () => 1 },
  });
  planner.setTasks(
    Array.from({ length: taskCount }, (_, i) => ({ id: `t${i}`, key: `k${i}` })),
    start,
  );
  return { clock, budget, planner, start };
}

describe('PollPlanner', () => {
  it('polls a task again at once after each hit, and at the idle pace after the first empty poll: no back-off ladder', () => {
    const { planner, start } = setup(1);
    planner.onHit('t0', start, start - 5_000);
    expect(planner.next()!.nextDueAt).toBe(start);
    planner.onHit('t0', start, start - 4_000);
    expect(planner.next()!.nextDueAt).toBe(start);
    const gaps: number[] = [];
    let t = start;
    for (let i = 0; i < 4; i++) {
      planner.onEmpty('t0', t);
      const next = planner.next()!.nextDueAt;
      gaps.push(next - t);
      t = next;
    }
    // The idle pace of one task from the first empty poll, the same each time: the month spread evenly (~65 s
    // at 40,000/month), a little faster in the hours around the two arrivals, which read busier than the rest.
    for (const gap of gaps) {
      expect(gap).toBeGreaterThan(50_000);
      expect(gap).toBeLessThan(70_000);
      expect(Math.abs(gap - gaps[0]!)).toBeLessThan(1_000);
    }
  });

  it('goes back to the idle pace at once when the re-poll after a single hit finds nothing (a trickle of work)', () => {
    const { planner, start } = setup(1);
    planner.onHit('t0', start);
    expect(planner.next()!.nextDueAt).toBe(start);
    planner.onEmpty('t0', start + 100);
    const gap = planner.next()!.nextDueAt - (start + 100);
    expect(gap).toBeGreaterThan(60_000);
    expect(gap).toBeLessThan(80_000);
  });

  it("never plans an idle poll past the month's end, when a new month brings a new budget", () => {
    const start = Date.UTC(2026, 0, 1);
    const clock = new ManualClock(start);
    const budget = new Budget({ limits: { perSecond: 5, perMinute: 50, perMonth: 40_000 }, clock });
    for (let i = 0; i < 39_999; i++) budget.recordSent(start + i * 50);
    const planner = new PollPlanner({ budget, maxPollIntervalMs: 900_000, errorBackoff: DEFAULT_BACKOFF });
    const tasks = Array.from({ length: 5 }, (_, i) => ({ id: `t${i}`, key: `k${i}` }));
    const jan25 = Date.UTC(2026, 0, 25);
    clock.set(jan25);
    planner.setTasks(tasks, jan25);
    for (const t of tasks) planner.onEmpty(t.id, jan25);
    // What is left of January spreads over days, but February starts afresh.
    expect(planner.idleIntervalMs(jan25)).toBeGreaterThanOrEqual(7 * 86_400_000);
    for (const t of planner.tasks) expect(t.nextDueAt).toBe(Date.UTC(2026, 1, 1));
  });

  it('keeps a wake that arrives while the poll is in flight: the task is due again at once, not at the idle pace', () => {
    const { planner, start } = setup(1);
    planner.sending('t0');
    planner.wake(start + 5); // work was queued and the worker nudged while the poll was on the wire
    planner.onEmpty('t0', start + 10); // that poll had been answered before the work arrived
    expect(planner.next()!.nextDueAt).toBe(start + 10);
    // A wake before the poll was sent was answered by it: the idle pace follows.
    planner.sending('t0');
    planner.onEmpty('t0', start + 20);
    expect(planner.next()!.nextDueAt - (start + 20)).toBeGreaterThan(60_000);
  });

  it('does not let a busy task starve an idle one: the task due first is polled first', () => {
    const { planner, start } = setup(2);
    const polled: string[] = [];
    let t = start;
    // t0 finds work on every poll; t1 never does. Each poll takes 200 ms.
    for (let i = 0; i < 2_000; i++) {
      const task = planner.next()!;
      t = Math.max(t, task.nextDueAt);
      polled.push(task.key);
      if (task.taskId === 't0') planner.onHit('t0', t);
      else planner.onEmpty('t1', t);
      t += 200;
    }
    const idlePolls = polled.filter((k) => k === 'k1').length;
    // 400 s of polling: the idle task is polled at its idle pace (about every 144 s for two tasks).
    expect(idlePolls).toBeGreaterThanOrEqual(3);
    expect(polled.filter((k) => k === 'k0').length).toBeGreaterThan(1_900);
  });

  it('falls back to the idle pace after a hit once work has run ahead of the month by more than the reserve', () => {
    const { planner, budget, start } = setup(1);
    for (let i = 0; i < 4_100; i++) budget.recordSent(start + i); // a backlog's burst, early in the month
    const now = start + 600_000;
    expect(budget.aheadOfPace(now)).toBe(true);
    planner.onHit('t0', now);
    expect(planner.next()!.nextDueAt - now).toBeGreaterThan(60_000);
  });

  it("waits the longest interval in a cold start's first hours of next to no work, until an arrival or a day", () => {
    const { planner, start } = setup(1);
    const idleAt = (t: number) => {
      planner.onEmpty('t0', t);
      return planner.next()!.nextDueAt - t;
    };
    // Polled empty every minute: the even pace for its first 4 hours watched, however quiet.
    let t = start;
    for (; t < start + 4 * HOUR; t += 60_000) expect(idleAt(t)).toBeLessThan(70_000);
    // Then 2 / 4 hours is under 0.5 an hour: nothing came, nothing is learnt to rank the hours by, and the
    // polls saved go to the hours that turn out busy.
    for (; t < start + 6 * HOUR; t += 60_000) idleAt(t);
    expect(idleAt(t)).toBe(900_000);
    // One arrival is enough to end it: 3 arrivals' worth of doubt over 6 hours is 0.5 an hour.
    planner.onHit('t0', t, t - 30_000);
    expect(idleAt(t + 1_000)).toBeLessThan(70_000);
  });

  it("ends the cold start's deferral after a day, or 3% of the month left, and never defers what was learnt", () => {
    // Watched a day with nothing: the even pace again, steady work is no longer slowed.
    const day = setup(1);
    let t = day.start;
    for (; t < day.start + 24 * HOUR; t += 300_000) day.planner.onEmpty('t0', t);
    day.planner.onEmpty('t0', t);
    expect(day.planner.next()!.nextDueAt - t).toBeLessThan(70_000);
    // From the 20th: 10 days left, 3% of them 7.2 hours: deferred at 6 hours, not at 8.
    const late = setup(1, Date.UTC(2026, 10, 21));
    t = late.start;
    for (; t < late.start + 6 * HOUR; t += 300_000) late.planner.onEmpty('t0', t);
    late.planner.onEmpty('t0', t);
    expect(late.planner.next()!.nextDueAt - t).toBe(900_000);
    for (; t < late.start + 8 * HOUR; t += 300_000) late.planner.onEmpty('t0', t);
    late.planner.onEmpty('t0', t);
    expect(late.planner.next()!.nextDueAt - t).toBeLessThan(300_000);
    // A profile kept from before (a restart, a week watched with a little work): never cold.
    const profile = new ArrivalProfile();
    const before = Date.UTC(2026, 9, 25);
    for (let u = before; u < before + 7 * 24 * HOUR; u += 600_000) {
      profile.observe(['k0'], u);
      if ((u - before) % (12 * HOUR) === 0) profile.arrival('k0', u, u);
    }
    const warm = setup(1, before + 7 * 24 * HOUR);
    const planner = new PollPlanner({
      budget: warm.budget,
      maxPollIntervalMs: 900_000,
      errorBackoff: DEFAULT_BACKOFF,
      profile,
    });
    planner.setTasks([{ id: 't0', key: 'k0' }], warm.start);
    t = warm.start;
    for (; t < warm.start + 8 * HOUR; t += 300_000) planner.onEmpty('t0', t);
    planner.onEmpty('t0', t);
    expect(planner.next()!.nextDueAt - t).toBeLessThan(70_000);
  });

  it('polls a quiet hour into which work surges at the common interval, and keeps it through a lull in that work', () => {
    // Three weeks learnt: weekdays 09-17 at 20 an hour, evenings from 20:00 empty, 0.5 an hour otherwise.
    const monday = Date.UTC(2026, 10, 23, 20);
    const from = monday - 21 * 24 * HOUR;
    const rate = (t: number) => {
      const d = new Date(t);
      const weekday = d.getUTCDay() >= 1 && d.getUTCDay() <= 5;
      if (weekday && d.getUTCHours() >= 9 && d.getUTCHours() < 17) return 20;
      return weekday && d.getUTCHours() >= 20 ? 0 : 0.5;
    };
    const random = mulberry32(5);
    const arrivals: number[] = [];
    for (let t = from; ;) {
      t += (-Math.log(1 - random()) * HOUR) / 20;
      if (t >= monday) break;
      if (random() < rate(t) / 20) arrivals.push(t);
    }
    const profile = new ArrivalProfile();
    for (let u = from, i = 0; u < monday; u += 60_000) {
      while (i < arrivals.length && arrivals[i]! < u) profile.arrival('k0', arrivals[i++]!, u);
      profile.observe(['k0'], u);
    }
    const clock = new ManualClock(monday);
    const budget = new Budget({ limits: { perSecond: 5, perMinute: 50, perMonth: 40_000 }, clock });
    const planner = new PollPlanner({
      budget,
      maxPollIntervalMs: 900_000,
      errorBackoff: DEFAULT_BACKOFF,
      profile,
    });
    planner.setTasks([{ id: 't0', key: 'k0' }], monday);
    const idleAt = (minutes: number) => {
      const t = monday + minutes * 60_000;
      planner.onEmpty('t0', t);
      return planner.next()!.nextDueAt - t;
    };
    const quiet = idleAt(0);
    expect(quiet).toBe(900_000);
    // Work moves into the evening: four arrivals in its first hour's last 20 minutes, one just after 21:00.
    for (const m of [40, 45, 50, 55, 60.5])
      planner.onHit('t0', monday + m * 60_000 + 10_000, monday + m * 60_000);
    const common = idleAt(61);
    expect(common).toBeLessThan(30_000);
    // Then nothing for 20 minutes (Poisson work at 13 an hour leaves such lulls now and then): the last half hour
    // holds 3 arrivals, which a quiet hour brings more often than once in a thousand times, but less than once in
    // twenty. Found surging, it stays so; the next work waits the common interval, not the quiet one.
    expect(idleAt(80)).toBe(common);
    // Once the half hour holds no more than chance would bring, the hour is quiet again.
    expect(idleAt(95)).toBeGreaterThan(5 * common);
  });

  it('backs off exponentially with jitter after errors, capped', () => {
    const { planner, start } = setup(1);
    const gaps: number[] = [];
    for (let i = 0; i < 12; i++) {
      planner.onError('t0', start);
      gaps.push(planner.next()!.nextDueAt - start);
    }
    expect(gaps[0]).toBe(2_000);
    expect(gaps[1]).toBe(4_000);
    expect(Math.max(...gaps)).toBe(300_000);
  });

  it('makes a task due now when woken, by key or all', () => {
    const { planner, start } = setup(2);
    planner.onEmpty('t0', start);
    planner.onEmpty('t1', start);
    expect(planner.wake(start + 10, 'k1')).toBe(1);
    expect(planner.next()!.key).toBe('k1');
    expect(planner.next()!.nextDueAt).toBe(start + 10);
    expect(planner.wake(start + 20)).toBe(2);
    expect(planner.wake(start + 20, 'nope')).toBe(0);
  });

  it('warns when the budget cannot poll every task within the maximum interval', () => {
    const { planner } = setup(20);
    // 20 tasks share one poll per ~72 s: each is polled every ~24 min, more than the 15-minute maximum.
    expect(planner.paceExceedsMaxInterval(Date.UTC(2026, 10, 1))).toBe(true);
    expect(setup(3).planner.paceExceedsMaxInterval(Date.UTC(2026, 10, 1))).toBe(false);
  });
  it('skips the back-off ladder while more than half of the minute budget is used, so work is not delayed', () => {
    const { planner, budget, start } = setup(1);
    for (let i = 0; i < 26; i++) budget.recordSent(start + i * 100);
    const now = start + 10_000;
    planner.onHit('t0', now);
    planner.onEmpty('t0', now);
    expect(planner.next()!.nextDueAt - now).toBeGreaterThan(60_000);
  });
});

describe('PollPlanner re-polls after a hit', () => {
  /** A planner whose profile has watched one task get `perHour` Poisson arrivals for three days. */
  function learnt(perHour: number, batch = 1, limits = { perSecond: 5, perMinute: 50, perMonth: 40_000 }) {
    const start = Date.UTC(2026, 10, 2);
    const profile = new ArrivalProfile();
    const random = mulberry32(5);
    let t = start - 3 * 24 * HOUR;
    for (; t < start; t += 60_000) {
      profile.observe(['k0'], t);
      if (random() < perHour / batch / 60)
        for (let i = 0; i < batch; i++) profile.arrival('k0', t + i, t + i);
    }
    const clock = new ManualClock(start);
    const budget = new Budget({ limits, clock });
    const planner = new PollPlanner({
      budget,
      profile,
      maxPollIntervalMs: 900_000,
      errorBackoff: DEFAULT_BACKOFF,
    });
    planner.setTasks([{ id: 't0', key: 'k0' }], start);
    return { planner, budget, start, intervalMs: planner.idleIntervalMs(start, 'k0') };
  }

  it('skips the re-poll after an execution that arrived just before the poll (the next one most likely has not), not after one that waited', () => {
    const { planner, start, intervalMs } = learnt(12);
    // 12 an hour and an interval of about 100 s: one that waited 2 s leaves about 1% odds of another pending.
    planner.onHit('t0', start, start - 2_000);
    expect(planner.next()!.nextDueAt - start).toBeGreaterThan(0.9 * intervalMs);
    // One that waited most of an interval: another arrived since with odds of about a quarter, so go again.
    planner.onHit('t0', start + 1, start + 1 - 0.9 * intervalMs);
    expect(planner.next()!.nextDueAt).toBe(start + 1);
  });

  it("forecasts handlers' own service calls as work: the idle pace leaves room for them", async () => {
    const limits = { perSecond: 1_000, perMinute: 10_000, perMonth: 40_000 };
    const plain = learnt(12, 1, limits);
    const calling = learnt(12, 1, limits);
    // Both claimed 20 executions; the handlers of the second made a service call for each.
    for (const { planner, start } of [plain, calling]) {
      for (let i = 0; i < 20; i++) planner.onHit('t0', start + i);
    }
    const gate = calling.budget.gateFor('handler');
    for (let i = 0; i < 20; i++) await gate.acquire('files.upload');
    // The same month used, replanned an hour on: 12 executions an hour cost a request more each, about 8,600
    // of the month's 40,000, taken from the ~24,000 the idle polls had: their interval grows by half.
    for (let i = 0; i < 20; i++) plain.budget.recordSent(plain.start + i);
    const later = plain.start + HOUR;
    const plainMs = plain.planner.idleIntervalMs(later, 'k0');
    const callingMs = calling.planner.idleIntervalMs(later, 'k0');
    expect(callingMs / plainMs).toBeGreaterThan(1.4);
    expect(callingMs / plainMs).toBeLessThan(1.8);
  });

  it("re-polls work the plan forecasts even while the month's use runs ahead of an even spend: busy hours are meant to", () => {
    // Three days of 12 an hour: the plan pays for each execution's re-poll. A week's busy days run the month
    // ahead of its even spend by more than the allowance, which shrinks as the month ends.
    const { planner, budget, start, intervalMs } = learnt(12);
    for (let i = 0; i < 6_000; i++) budget.recordSent(start + i);
    const now = start + 600_000;
    expect(budget.aheadOfPace(now)).toBe(true);
    planner.onHit('t0', now, now - 0.9 * intervalMs);
    expect(planner.next()!.nextDueAt).toBe(now);
  });

  it('always re-polls work that arrives in batches: a hit means the rest of its batch is waiting', () => {
    const { planner, start } = learnt(12, 20);
    planner.onHit('t0', start, start - 2_000);
    expect(planner.next()!.nextDueAt).toBe(start);
  });

  // A cold start's doubt (one arrival more than seen, in the seconds watched) alone reads the month as overloaded
  // from 30 s to a few minutes in: overload then put each re-poll after a hit off by an idle interval (389 s in
  // test/daemon/throughput.test.ts), leaving a batch's last execution pending while the month had 99% left.
  it("drains a batch found in a cold start's first minutes, however long it takes: doubt alone is no overload", () => {
    const { planner, budget, start } = setup(3);
    const random = mulberry32(35);
    let now = start;
    const left = [12, 20, 28];
    const stalls: string[] = [];
    while (left.some((n) => n > 0) && now < start + 300_000) {
      // Polls go out as the per-second budget lets them beside the reports: 0.3 to 1.5 s apart.
      now += 300 + Math.floor(random() * 1_200);
      const task = planner.next();
      if (!task) break;
      if (task.nextDueAt > now) now = task.nextDueAt;
      const i = Number(task.taskId.slice(1));
      planner.sending(task.taskId);
      budget.recordSent(now);
      if (left[i]! === 0) {
        planner.onEmpty(task.taskId, now);
        continue;
      }
      left[i]!--;
      planner.onHit(task.taskId, now, start);
      budget.recordSent(now);
      const waitMs = planner.tasks.find((t) => t.taskId === task.taskId)!.nextDueAt - now;
      if (waitMs > 0) stalls.push(`${task.key} at ${((now - start) / 1000).toFixed(1)} s waits ${waitMs} ms`);
    }
    expect(stalls).toEqual([]);
    expect(left).toEqual([0, 0, 0]);
    expect(now - start).toBeGreaterThan(40_000);
  });

  it("drains work that trickles in during a cold start's first minute: the first hit's doubt holds none back", () => {
    const { planner, budget, start } = setup(1);
    const random = mulberry32(36);
    // Five arrivals 6 s apart on average (Poisson gaps) from 20 s after the start: the rate read from so few
    // may well be more than the month can carry, and the plan says so (a doubtful overload).
    const arrivals: number[] = [];
    for (let at = start + 20_000; arrivals.length < 5;) {
      at += Math.ceil(-Math.log(1 - random()) * 6_000);
      arrivals.push(at);
    }
    const claimedAt: number[] = [];
    let now = start;
    planner.onEmpty('t0', now);
    while (claimedAt.length < arrivals.length && now < start + 3_600_000) {
      now = Math.max(now + 200, planner.next()!.nextDueAt);
      planner.sending('t0');
      budget.recordSent(now);
      const arrivedAt = arrivals[claimedAt.length]!;
      if (arrivedAt > now) {
        planner.onEmpty('t0', now);
        continue;
      }
      claimedAt.push(now);
      planner.onHit('t0', now, arrivedAt);
      budget.recordSent(now);
    }
    expect(claimedAt).toHaveLength(arrivals.length);
    // What was waiting at the first poll that found work is claimed by the re-polls right after it.
    const firstHit = claimedAt[0]!;
    const waiting = arrivals.filter((at) => at <= firstHit);
    expect(waiting.length).toBeGreaterThanOrEqual(3);
    for (let i = 0; i < waiting.length; i++) expect(claimedAt[i]! - firstHit).toBeLessThan(2_000);
  });
});
