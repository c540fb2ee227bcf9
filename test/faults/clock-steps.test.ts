// Issue 36's clock rows on the injected clock: the daemon's core (budget, planner, poll loop, reports) on a
// clock whose wall face steps back an hour, or runs ten minutes behind the service's, while its monotonic face
// and the service keep time. Nothing but the month a request counts in may change: the service's limits hold
// (0 × 429, at most 5/s and 50/min), no execution is lost, and requests resume within a second of the step.
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { ServiceClient } from '../../src/api/client.ts';
import type { TaskExecution } from '../../src/api/types.ts';
import { Budget } from '../../src/budget/budget.ts';
import { maxInWindow } from '../../src/budget/sliding-window.ts';
import type { Clock } from '../../src/clock/clock.ts';
import { ManualClock } from '../../src/clock/manual-clock.ts';
import { Emulator, inProcessTransport, type FaultRule } from '../../src/emulator/index.ts';
import { PollPlanner } from '../../src/scheduler/poll-planner.ts';
import { Scheduler } from '../../src/scheduler/scheduler.ts';
import { runOnClock } from '../clock/virtual-time.ts';

const KEY = 'clock-steps-key';
const START = Date.UTC(2026, 10, 27, 12);
const PER_SECOND = 5;
const PER_MINUTE = 50;
const HOUR_MS = 3_600_000;

/**
 * The daemon's clock: the service's monotonic time, and a wall clock `offsetMs` off the service's that
 * `step()` moves, as NTP or an operator would (the service's clock, the emulator's, does not move).
 */
class DaemonClock implements Clock {
  readonly #service: ManualClock;
  offsetMs: number;

  constructor(service: ManualClock, offsetMs = 0) {
    this.#service = service;
    this.offsetMs = offsetMs;
  }

  now(): number {
    return this.#service.now() + this.offsetMs;
  }

  monotonic(): number {
    // The release before issue 36 had no monotonic face (its ManualClock neither): the rows run there too.
    const service = this.#service as Partial<Pick<ManualClock, 'monotonic'>> & ManualClock;
    return typeof service.monotonic === 'function' ? service.monotonic() : service.now();
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return this.#service.sleep(ms, signal);
  }

  step(ms: number): void {
    this.offsetMs += ms;
  }
}

function rig(options: { offsetMs?: number; maxPollIntervalMs?: number } = {}) {
  const clock = new ManualClock(START);
  const daemonClock = new DaemonClock(clock, options.offsetMs);
  // The service counts its windows on its own clock: a burst the budget let out would meet a 429.
  const emulator = new Emulator({
    clock,
    apiKeys: [KEY],
    limits: { perSecond: PER_SECOND, perMinute: PER_MINUTE, perMonth: 0 },
  });
  const budget = new Budget({
    limits: { perSecond: PER_SECOND, perMinute: PER_MINUTE, perMonth: 40_000 },
    clock: daemonClock,
    safetyMarginMs: 0,
  });
  const client = new ServiceClient({
    baseUrl: 'http://service.invalid',
    apiKey: KEY,
    clock: daemonClock,
    gate: budget,
    // Answers carry the service's clock in their Date header, as over HTTP.
    transport: inProcessTransport(emulator, undefined, { dateHeader: true }),
  });
  const task = emulator.createTask({ key: 'digest' });
  const planner = new PollPlanner({
    budget,
    maxPollIntervalMs: options.maxPollIntervalMs ?? 30_000,
    errorBackoff: { baseMs: 1_000, maxMs: 8_000, random: () => 0.5 },
  });
  planner.setTasks([{ id: task.id, key: task.key }], daemonClock.monotonic());
  const scheduler = new Scheduler({
    client,
    planner,
    clock: daemonClock,
    logger: pino({ level: 'silent' }),
    concurrency: 4,
    unauthorizedRetryMs: 120_000,
    dispatch: async (_task, execution: TaskExecution) => {
      try {
        await client.reportExecution(execution.id, { status: 'COMPLETED', output: { by: 'clock-steps' } });
      } catch {
        // Unreported: the tally's `lost` says so.
      }
    },
  });
  const controller = new AbortController();
  const running = scheduler.run(controller.signal);
  const requests = () => emulator.requests();
  /** Service-clock instants of the requests in [fromMs, toMs). */
  const sentBetween = (fromMs: number, toMs = Infinity) =>
    requests()
      .map((r) => r.at)
      .filter((at) => at >= fromMs && at < toMs);
  return {
    clock,
    daemonClock,
    emulator,
    scheduler,
    task,
    requests,
    sentBetween,
    faults: (rules: FaultRule[]) => emulator.setFaults(rules),
    enqueue: (count: number) => {
      for (let i = 0; i < count; i++) emulator.enqueueExecution(task.id, { n: i });
    },
    /** Stops the loop and lets every claimed execution's report go (the clock moves while they wait). */
    async stop() {
      controller.abort(new Error('test over'));
      await runOnClock(
        clock,
        running.then(() => scheduler.drained()),
        10_000,
      );
    },
    tally() {
      const executions = emulator.executions();
      const claimed = executions.filter((e) => e.claimedAt !== undefined || e.reports.length > 0);
      return {
        claimed: claimed.length,
        lost: claimed.filter((e) => e.reports.length === 0).length,
        duplicated: claimed.reduce((sum, e) => sum + Math.max(0, e.reports.length - 1), 0),
      };
    },
    /** The service's limits as it counted them, over every request. */
    limits(injected429s = 0) {
      const all = requests();
      const at = all.map((r) => r.at);
      return {
        rateLimited: all.filter((r) => r.status === 429).length - injected429s,
        maxPerSecond: maxInWindow(at, 1_000),
        maxPerMinute: maxInWindow(at, 60_000),
      };
    },
  };
}

/** The first instant in `instants` at or after `fromMs`, minus `fromMs`: how long requests took to resume. */
function resumedAfter(instants: number[], fromMs: number): number {
  const next = instants.filter((at) => at >= fromMs).sort((a, b) => a - b)[0];
  return next === undefined ? Infinity : next - fromMs;
}

/** The longest stretch without a request, from `fromMs` to `toMs`. */
function longestSilence(instants: number[], fromMs: number, toMs: number): number {
  const sorted = [fromMs, ...instants.filter((at) => at >= fromMs && at <= toMs).sort((a, b) => a - b), toMs];
  let longest = 0;
  for (let i = 1; i < sorted.length; i++) longest = Math.max(longest, sorted[i]! - sorted[i - 1]!);
  return longest;
}

const WITHIN_LIMITS = { rateLimited: 0, maxPerSecond: PER_SECOND, maxPerMinute: PER_MINUTE };
function expectWithinLimits(limits: { rateLimited: number; maxPerSecond: number; maxPerMinute: number }) {
  expect(limits.rateLimited).toBe(WITHIN_LIMITS.rateLimited);
  expect(limits.maxPerSecond).toBeLessThanOrEqual(WITHIN_LIMITS.maxPerSecond);
  expect(limits.maxPerMinute).toBeLessThanOrEqual(WITHIN_LIMITS.maxPerMinute);
}

describe('a wall clock that steps or runs behind (issue 36, injected clock)', () => {
  it('wall clock steps back 1 h while 400 executions wait: 50/min goes on, resumed within 1 s', async () => {
    const r = rig();
    r.enqueue(400);
    // While requests flow (the minute's window is not yet full), the wall clock steps back an hour.
    await r.clock.advance(4_500);
    const stepAt = r.clock.now();
    r.daemonClock.step(-HOUR_MS);
    await r.clock.advance(240_000);
    const after = r.sentBetween(stepAt, stepAt + 240_000);
    await r.stop();
    expect(resumedAfter(after, stepAt)).toBeLessThanOrEqual(1_000);
    // Four minutes at 50/min, less the minute's first burst already spent before the step.
    expect(after.length).toBeGreaterThanOrEqual(4 * PER_MINUTE - 30);
    expect(r.tally()).toMatchObject({ lost: 0, duplicated: 0 });
    expectWithinLimits(r.limits());
  });

  it('the same step on an idle daemon: it keeps polling, and work enqueued after the step is claimed', async () => {
    const r = rig({ maxPollIntervalMs: 30_000 });
    await r.clock.advance(90_000);
    const stepAt = r.clock.now();
    r.daemonClock.step(-HOUR_MS);
    await r.clock.advance(20_000);
    r.enqueue(1);
    const enqueuedAt = r.clock.now();
    await r.clock.advance(220_000);
    const after = r.sentBetween(stepAt, stepAt + 240_000);
    const claimedAt = r.emulator.executions()[0]!.claimedAt;
    await r.stop();
    // An idle task is polled at least every maxPollIntervalMs, the step notwithstanding.
    expect(longestSilence(after, stepAt, stepAt + 240_000)).toBeLessThanOrEqual(30_000 + 1_000);
    expect(claimedAt).toBeDefined();
    expect(Date.parse(claimedAt!) - enqueuedAt).toBeLessThanOrEqual(30_000 + 1_000);
    expect(r.tally()).toMatchObject({ claimed: 1, lost: 0 });
    expectWithinLimits(r.limits());
  });

  it('the same step during a 60 s 429 pause: requests and reports resume when the pause ends, /wake too', async () => {
    const r = rig();
    r.enqueue(400);
    r.faults([{ operation: 'tasks.poll', kind: 'rateLimit', retryAfterSeconds: 60, count: 1 }]);
    await r.clock.advance(2_000);
    const paused = r.requests().find((q) => q.status === 429);
    expect(paused).toBeDefined();
    const pauseEndsAt = paused!.at + 60_000;
    await r.clock.advance(10_000);
    r.daemonClock.step(-HOUR_MS);
    // An operator's /wake during the pause: the pause holds, the wake is owed when it ends.
    expect(r.scheduler.wake()).toBe(1);
    await r.clock.advance(pauseEndsAt - r.clock.now() + 230_000);
    const after = r.sentBetween(pauseEndsAt, pauseEndsAt + 230_000);
    const reportsAfter = r
      .requests()
      .filter((q) => q.at >= pauseEndsAt && q.operation === 'executions.report').length;
    await r.stop();
    expect(r.sentBetween(paused!.at + 1, pauseEndsAt)).toEqual([]);
    expect(resumedAfter(after, pauseEndsAt)).toBeLessThanOrEqual(1_000);
    expect(after.length).toBeGreaterThanOrEqual(3 * PER_MINUTE);
    expect(reportsAfter).toBeGreaterThan(0);
    expect(r.tally()).toMatchObject({ lost: 0, duplicated: 0 });
    expectWithinLimits(r.limits(1));
  });

  it("the daemon's clock 10 min behind the service's from the start: polling keeps 50/min", async () => {
    const r = rig({ offsetMs: -10 * 60_000 });
    r.enqueue(400);
    await r.clock.advance(330_000);
    const sent = r.sentBetween(START, START + 330_000);
    const claimed = r.tally().claimed;
    await r.stop();
    // Five and a half minutes at 50/min, a poll and a report per execution.
    expect(claimed).toBeGreaterThanOrEqual(120);
    expect(longestSilence(sent, START, START + 330_000)).toBeLessThanOrEqual(60_000);
    expect(r.tally()).toMatchObject({ lost: 0, duplicated: 0 });
    expectWithinLimits(r.limits());
  });
});
