// The poll loop on the manual clock, with the real budget and planner, against the emulator answering in
// process with the same per-second and per-minute limits as the budget: polls go out within the budget (the
// emulator would answer 429 otherwise), failed polls back off, a stop is prompt, and under random arrivals
// from a seeded source no window is ever overrun.
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import type { TaskExecution } from '../../src/api/types.ts';
import { maxInWindow } from '../../src/budget/sliding-window.ts';
import { backoffDelayMs, type BackoffOptions } from '../../src/clock/backoff.ts';
import { ManualClock, flushMicrotasks } from '../../src/clock/manual-clock.ts';
import { Emulator, type FaultRule } from '../../src/emulator/index.ts';
import { PollPlanner } from '../../src/scheduler/poll-planner.ts';
import { Scheduler, type PolledTask, type PollResult } from '../../src/scheduler/scheduler.ts';
import { serviceOnClock, seededRandom } from '../clock/virtual-time.ts';
import { WorkerEvents } from '../../src/events/worker-events.ts';

const KEY = 'scheduler-unit-key';
const START = Date.UTC(2026, 10, 27, 12);

interface RigOptions {
  tasks: string[];
  perSecond?: number;
  perMinute?: number;
  concurrency?: number;
  maxPollIntervalMs?: number;
  errorBackoff?: BackoffOptions;
  unauthorizedRetryMs?: number;
  claimBlocker?: () => string | undefined;
  /** Clock time each dispatched execution runs before it is reported COMPLETED. Default 0. */
  runMs?: (execution: TaskExecution) => number;
}

function rig(options: RigOptions) {
  const perSecond = options.perSecond ?? 5;
  const perMinute = options.perMinute ?? 100;
  const clock = new ManualClock(START);
  // The service enforces the same windows as the budget: a poll the budget let out too early meets a 429.
  const emulator = new Emulator({ clock, apiKeys: [KEY], limits: { perSecond, perMinute, perMonth: 0 } });
  const { budget, client } = serviceOnClock(emulator, clock, {
    apiKey: KEY,
    limits: { perSecond, perMinute, perMonth: 1_000_000 },
  });
  const tasks = options.tasks.map((key) => emulator.createTask({ key }));
  const planner = new PollPlanner({
    budget,
    maxPollIntervalMs: options.maxPollIntervalMs ?? 10_000,
    errorBackoff: options.errorBackoff ?? { baseMs: 1_000, maxMs: 8_000, random: () => 0.5 },
  });
  planner.setTasks(
    tasks.map((t) => ({ id: t.id, key: t.key })),
    clock.now(),
  );
  const concurrency = options.concurrency ?? 2;
  const polls: { key: string; result: PollResult; at: number }[] = [];
  const authorization: boolean[] = [];
  let running = 0;
  let mostRunning = 0;
  const dispatched: string[] = [];
  const events = new WorkerEvents();
  events.on('poll', ({ task, result }) => polls.push({ key: task, result, at: clock.now() - START }));
  const scheduler = new Scheduler({
    client,
    planner,
    clock,
    logger: pino({ level: 'silent' }),
    concurrency,
    unauthorizedRetryMs: options.unauthorizedRetryMs ?? 120_000,
    ...(options.claimBlocker ? { claimBlocker: options.claimBlocker } : {}),
    dispatch: async (_task: PolledTask, execution: TaskExecution) => {
      dispatched.push(execution.id);
      mostRunning = Math.max(mostRunning, ++running);
      try {
        await clock.sleep(options.runMs?.(execution) ?? 0);
        await client.reportExecution(execution.id, { status: 'COMPLETED', output: { by: 'unit' } });
      } catch {
        // Reported by nobody: the test's counts say so.
      } finally {
        running--;
      }
    },
    events,
    onAuthorizationChange: (authorized) => authorization.push(authorized),
  });
  const requests = () => emulator.requests();
  const sentAt = (operation?: string) =>
    requests()
      .filter((r) => operation === undefined || r.operation === operation)
      .map((r) => r.at);
  const faults = (rules: FaultRule[]) => emulator.setFaults(rules);
  return {
    clock,
    emulator,
    budget,
    planner,
    scheduler,
    tasks,
    polls,
    dispatched,
    authorization,
    concurrency,
    perSecond,
    perMinute,
    requests,
    sentAt,
    faults,
    events,
    mostRunning: () => mostRunning,
  };
}

/** Starts the loop; `stop()` aborts it and waits for the loop and every execution it started. */
function start(r: ReturnType<typeof rig>) {
  const controller = new AbortController();
  let ended = false;
  const running = r.scheduler.run(controller.signal).then(() => (ended = true));
  return {
    ended: () => ended,
    async stop() {
      controller.abort(new Error('test over'));
      await running;
      await r.scheduler.drained();
    },
  };
}

describe('Scheduler', () => {
  it('claims and dispatches what is pending, within the budget: the service never answers 429', async () => {
    const r = rig({ tasks: ['a', 'b', 'c'], perSecond: 2, perMinute: 20 });
    const queued = r.tasks.flatMap((t) => [1, 2, 3, 4].map(() => r.emulator.enqueueExecution(t.id, {}).id));
    const loop = start(r);
    await r.clock.advance(120_000);
    await loop.stop();
    expect([...r.dispatched].sort()).toEqual([...queued].sort());
    expect(r.emulator.executions().every((e) => e.status === 'COMPLETED')).toBe(true);
    expect(r.requests().filter((q) => q.status === 429)).toEqual([]);
    expect(maxInWindow(r.sentAt(), 1_000)).toBeLessThanOrEqual(2);
    expect(maxInWindow(r.sentAt(), 60_000)).toBeLessThanOrEqual(20);
    // 12 claims, 12 reports and the polls that found nothing are more than the minute's 20: the rest waited.
    expect(Math.max(...r.sentAt()) - START).toBeGreaterThanOrEqual(60_000);
  });

  it('backs off a failing task exponentially (clock/backoff.ts), and polls at its pace again once answered', async () => {
    const errorBackoff = { baseMs: 1_000, maxMs: 16_000, random: seededRandom(3) };
    const expected = { ...errorBackoff, random: seededRandom(3) };
    const r = rig({ tasks: ['flaky'], errorBackoff, maxPollIntervalMs: 60_000 });
    r.faults([{ operation: 'tasks.poll', kind: 'status', status: 503, count: 5 }]);
    const loop = start(r);
    await r.clock.advance(60_000);
    await loop.stop();
    const results = r.polls.map((p) => p.result);
    expect(results.slice(0, 6)).toEqual(['error', 'error', 'error', 'error', 'error', 'empty']);
    const at = r.polls.map((p) => p.at);
    const gaps = at.slice(1, 6).map((t, i) => t - at[i]!);
    // A poll's n-th failure in a row waits backoffDelayMs(n + 1): one step above reports and attempts.
    expect(gaps).toEqual([1, 2, 3, 4, 5].map((n) => backoffDelayMs(n + 1, expected)));
    for (const [i, gap] of gaps.entries()) expect(gap).toBeLessThanOrEqual(Math.min(16_000, 2_000 * 2 ** i));
    // Answered again: the streak is over, and the next poll comes at the idle pace, not the back-off.
    expect(r.planner.tasks[0]!.errorStreak).toBe(0);
    expect(r.polls.slice(6).every((p) => p.result === 'empty')).toBe(true);
  });

  it('waits out a 429 in the budget pause, without counting it as a failure', async () => {
    const r = rig({ tasks: ['a'] });
    r.faults([{ operation: 'tasks.poll', kind: 'rateLimit', retryAfterSeconds: 7, count: 1 }]);
    r.emulator.enqueueExecution(r.tasks[0]!.id, {});
    const loop = start(r);
    await r.clock.advance(6_999);
    expect(r.sentAt('tasks.poll').map((t) => t - START)).toEqual([0]);
    await r.clock.advance(1);
    // At the pause's end the poll claims the execution, and a re-poll after the hit follows at once.
    expect(r.sentAt('tasks.poll').map((t) => t - START)).toEqual([0, 7_000, 7_000]);
    expect(r.polls.map((p) => p.result)).toEqual(['error', 'hit', 'empty']);
    await loop.stop();
    expect(r.dispatched).toHaveLength(1);
    expect(r.planner.tasks[0]!.errorStreak).toBe(0);
  });

  it('stops polling while the key is refused (401) and tries again after unauthorizedRetryMs', async () => {
    const r = rig({ tasks: ['a', 'b'], unauthorizedRetryMs: 30_000, concurrency: 1 });
    r.faults([{ operation: 'tasks.poll', kind: 'status', status: 401, count: 1 }]);
    const loop = start(r);
    await r.clock.advance(29_999);
    expect(r.sentAt('tasks.poll').map((t) => t - START)).toEqual([0]);
    expect(r.scheduler.authorized).toBe(false);
    await r.clock.advance(1);
    expect(r.scheduler.authorized).toBe(true);
    expect(r.authorization).toEqual([false, true]);
    expect(r.sentAt('tasks.poll')[1]! - START).toBe(30_000);
    await loop.stop();
  });

  it('spends no poll on a wake while the key is refused; a new key is tried at once, then every task', async () => {
    const r = rig({ tasks: ['a', 'b'], unauthorizedRetryMs: 30_000, concurrency: 1 });
    r.emulator.setApiKeys(['another-key']);
    const loop = start(r);
    await r.clock.advance(100);
    expect(r.scheduler.authorized).toBe(false);
    const refused = r.sentAt('tasks.poll').length;
    for (let i = 0; i < 10; i++) {
      expect(r.scheduler.wake()).toBe(2);
      await r.clock.advance(1_000);
    }
    expect(r.sentAt('tasks.poll')).toHaveLength(refused);
    // The key the client sends is accepted again (DF_API_KEY_FILE gave it): one poll at once, not in 20 s.
    r.emulator.setApiKeys([KEY]);
    r.scheduler.keyChanged();
    await r.clock.advance(10);
    expect(r.scheduler.authorized).toBe(true);
    const after = r.sentAt('tasks.poll').filter((t) => t - START >= 10_100);
    expect(after.length).toBeGreaterThanOrEqual(2);
    expect(Math.max(...after) - START).toBeLessThan(10_200);
    expect(r.authorization).toEqual([false, true]);
    await loop.stop();
  });

  it('tries a new key at once when it came while the poll that met the 401 was out', async () => {
    // The race of a key rotation: the back-off step's poll leaves with the old key, the new one is taken
    // (DF_API_KEY_FILE's watch, or the re-read that 401 asks for) before that poll's answer is handled.
    const r = rig({ tasks: ['a'], unauthorizedRetryMs: 30_000, concurrency: 1 });
    r.emulator.setApiKeys(['another-key']);
    let refused = 0;
    const loop = start(r);
    await r.clock.advance(100);
    expect(r.scheduler.authorized).toBe(false);
    expect(r.sentAt('tasks.poll')).toHaveLength(1);
    const onPoll = ({ result }: { result: PollResult }) => {
      if (result !== 'error' || ++refused !== 1) return;
      // Told before the poll's 401 is handled: the key changes while that poll is still out.
      r.emulator.setApiKeys([KEY]);
      r.scheduler.keyChanged();
    };
    r.events.on('poll', onPoll);
    await r.clock.advance(30_000);
    const backOffStep = r.sentAt('tasks.poll')[1]! - START;
    await r.clock.advance(10);
    expect(r.scheduler.authorized).toBe(true);
    // The next poll went at once with the new key, not a back-off step (30 s) later.
    expect(r.sentAt('tasks.poll')[2]! - START).toBeLessThan(backOffStep + 10);
    await loop.stop();
  });

  it('stops promptly when aborted while idle, leaving no sleeper behind', async () => {
    const r = rig({ tasks: ['a'], maxPollIntervalMs: 600_000 });
    const loop = start(r);
    await r.clock.advance(1_000);
    expect(r.clock.pending).toBeGreaterThan(0);
    const before = r.clock.now();
    const stopping = loop.stop();
    await flushMicrotasks();
    expect(loop.ended()).toBe(true);
    await stopping;
    expect(r.clock.now()).toBe(before);
    expect(r.clock.pending).toBe(0);
    const polls = r.sentAt('tasks.poll').length;
    await r.clock.advance(3_600_000);
    expect(r.sentAt('tasks.poll')).toHaveLength(polls);
  });

  it('stops promptly while every slot is taken; drained() then waits for the execution to be reported', async () => {
    const r = rig({ tasks: ['a'], concurrency: 1, runMs: () => 30_000 });
    const queued = r.emulator.enqueueExecution(r.tasks[0]!.id, {});
    const controller = new AbortController();
    let ended = false;
    const running = r.scheduler.run(controller.signal).then(() => (ended = true));
    await r.clock.advance(1_000);
    expect(r.dispatched).toEqual([queued.id]);
    controller.abort(new Error('stopping'));
    await flushMicrotasks();
    expect(ended).toBe(true);
    let drained = false;
    const draining = r.scheduler.drained().then(() => (drained = true));
    await r.clock.advance(28_999);
    expect(drained).toBe(false);
    await r.clock.advance(1);
    await draining;
    expect(r.emulator.execution(queued.id)?.status).toBe('COMPLETED');
    await running;
  });

  it('cancels, unsent, a poll still waiting in the budget when it stops', async () => {
    const r = rig({ tasks: ['a', 'b', 'c'], perSecond: 1, perMinute: 60, concurrency: 3 });
    const loop = start(r);
    await r.clock.advance(0);
    // One poll went out; the other two wait for the next second in the budget.
    expect(r.sentAt('tasks.poll')).toHaveLength(1);
    const stopping = loop.stop();
    await flushMicrotasks();
    await stopping;
    await r.clock.advance(10_000);
    expect(r.sentAt('tasks.poll')).toHaveLength(1);
    expect(r.budget.snapshot().waiting).toBe(0);
  });

  it('claims nothing while claimBlocker says why, and polls again soon after it clears', async () => {
    let blocked: string | undefined = 'journal not writable';
    const r = rig({ tasks: ['a'], claimBlocker: () => blocked });
    r.emulator.enqueueExecution(r.tasks[0]!.id, {});
    const loop = start(r);
    await r.clock.advance(60_000);
    expect(r.sentAt('tasks.poll')).toEqual([]);
    blocked = undefined;
    await r.clock.advance(5_000);
    expect(r.dispatched).toHaveLength(1);
    expect(r.sentAt('tasks.poll')[0]! - START).toBeLessThanOrEqual(65_000);
    await loop.stop();
  });

  it('polls a woken task at once, well before its idle interval', async () => {
    const r = rig({ tasks: ['a', 'b'], maxPollIntervalMs: 600_000 });
    const loop = start(r);
    await r.clock.advance(1_000);
    const polled = r.sentAt('tasks.poll').length;
    r.emulator.enqueueExecution(r.tasks[1]!.id, {});
    expect(r.scheduler.wake('b')).toBe(1);
    const wokenAt = r.clock.now();
    await r.clock.advance(0);
    // The woken poll claims the execution at once; a re-poll after the hit finds nothing more.
    expect(r.polls.slice(polled)).toEqual([
      { key: 'b', result: 'hit', at: wokenAt - START },
      { key: 'b', result: 'empty', at: wokenAt - START },
    ]);
    expect(r.dispatched).toHaveLength(1);
    await loop.stop();
  });

  it.each([
    ['Poisson', 11],
    ['Poisson', 12],
    ['bursty', 21],
    ['bursty', 22],
  ])(
    'never overruns a window and never runs more than the concurrency under %s arrivals (seed %i)',
    async (kind, seed) => {
      const random = seededRandom(seed);
      const perSecond = 3;
      const perMinute = 40;
      const r = rig({
        tasks: ['t1', 't2', 't3', 't4'],
        perSecond,
        perMinute,
        concurrency: 3,
        maxPollIntervalMs: 20_000,
        errorBackoff: { baseMs: 500, maxMs: 8_000, random },
        runMs: () => Math.floor(random() * 4_000),
      });
      const durationMs = 10 * 60_000;
      const arrivals =
        kind === 'Poisson' ? poisson(random, 1 / 15_000, durationMs) : bursts(random, durationMs);
      // Now and then the service fails a poll too: back-off and budget must hold together.
      r.faults([{ operation: 'tasks.poll', kind: 'status', status: 503, probability: 0.05 }]);
      void (async () => {
        for (const at of arrivals) {
          await r.clock.sleep(START + at - r.clock.now());
          r.emulator.enqueueExecution(r.tasks[Math.floor(random() * r.tasks.length)]!.id, { at });
        }
      })();
      const loop = start(r);
      await r.clock.advance(durationMs + 5 * 60_000);
      await loop.stop();

      const sent = r.sentAt();
      expect(r.requests().filter((q) => q.rateLimited)).toEqual([]);
      // Four tasks at the month's pace want more than the minute allows: the windows bind, and hold.
      expect(maxInWindow(sent, 1_000)).toBe(perSecond);
      expect(maxInWindow(sent, 60_000)).toBe(perMinute);
      expect(r.mostRunning()).toBeLessThanOrEqual(r.concurrency);
      // Everything that arrived was claimed and reported once the arrivals stopped.
      expect(r.dispatched).toHaveLength(arrivals.length);
      expect(r.emulator.executions().filter((e) => e.status !== 'COMPLETED')).toEqual([]);
      expect(r.emulator.executions().every((e) => e.reports.length === 1)).toBe(true);
    },
  );
});

/** Instants (ms) of a Poisson process of `ratePerMs` over `durationMs`. */
function poisson(random: () => number, ratePerMs: number, durationMs: number): number[] {
  const out: number[] = [];
  for (
    let at = -Math.log(1 - random()) / ratePerMs;
    at < durationMs;
    at += -Math.log(1 - random()) / ratePerMs
  ) {
    out.push(Math.floor(at));
  }
  return out;
}

/** Quiet stretches with bursts: every 2 to 4 minutes, 10 to 25 executions within a second. */
function bursts(random: () => number, durationMs: number): number[] {
  const out: number[] = [];
  for (let at = 30_000; at < durationMs; at += 120_000 + Math.floor(random() * 120_000)) {
    const size = 10 + Math.floor(random() * 16);
    for (let i = 0; i < size; i++) out.push(at + Math.floor(random() * 1_000));
  }
  return out.sort((a, b) => a - b);
}
