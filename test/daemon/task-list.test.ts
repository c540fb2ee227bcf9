// The task list on the manual clock, against the emulator answering in process: the first read (retried until
// the service answers, refused keys stopping the start), then refreshes that bring tasks appearing and
// disappearing to the poll planner, and keep the current tasks when a refresh fails.
import { pino } from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ManualClock } from '../../src/clock/manual-clock.ts';
import { loadConfig } from '../../src/config/load.ts';
import { WorkerEvents } from '../../src/events/worker-events.ts';
import { MATCHED_TASK_REFRESH_MS } from '../../src/daemon/task-refresh.ts';
import { StartupError, TaskList } from '../../src/daemon/task-list.ts';
import { TaskRegistry } from '../../src/daemon/task-registry.ts';
import { Emulator, type FaultRule } from '../../src/emulator/index.ts';
import { defineTask, type TaskModule } from '../../src/handlers/define-task.ts';
import { PollPlanner } from '../../src/scheduler/poll-planner.ts';
import { driveClockUntil, serviceOnClock, runOnClock } from '../clock/virtual-time.ts';

const KEY = 'task-list-key';
const START = Date.UTC(2026, 10, 27, 12);
const REFRESH_MS = 60_000;

afterEach(() => {
  vi.restoreAllMocks();
});

function rig(options: { handlers: string[]; sync?: boolean; perMonth?: number }) {
  const clock = new ManualClock(START);
  const emulator = new Emulator({
    clock,
    apiKeys: [KEY],
    limits: { perSecond: 0, perMinute: 0, perMonth: 0 },
  });
  const config = loadConfig({
    env: {},
    overrides: {
      'scheduler.taskRefreshMs': REFRESH_MS,
      'scheduler.retryBaseMs': 100,
      'scheduler.errorBackoffMaxMs': 1_000,
    },
  });
  const { budget, client } = serviceOnClock(emulator, clock, {
    apiKey: KEY,
    limits: { perSecond: 20, perMinute: 600, perMonth: options.perMonth ?? 100_000 },
  });
  const logger = pino({ level: 'silent' });
  const handlers = new Map<string, TaskModule>(
    options.handlers.map((key) => [key, defineTask({ key, handle: () => ({}) })]),
  );
  const registry = new TaskRegistry({ handlers, client, logger, sync: options.sync ?? false });
  const events = new WorkerEvents();
  /** Each task list as matched: the task keys served, and the handlers without a task. */
  const matched: { served: readonly string[]; withoutTask: readonly string[] }[] = [];
  events.on('tasks', (match) => matched.push(match));
  const reads: string[] = [];
  const list = new TaskList({
    registry,
    config,
    logger,
    clock,
    events,
    exclusive: async (read) => {
      reads.push('read');
      return await read();
    },
  });
  const planner = new PollPlanner({ budget, errorBackoff: { baseMs: 100, maxMs: 1_000 } });
  const listed = () =>
    emulator
      .requests()
      .filter((r) => r.operation === 'tasks.list')
      .map((r) => ({ at: r.at - START, status: r.status }));
  const planned = () => planner.tasks.map((t) => t.key).sort();
  const faults = (rules: FaultRule[]) => emulator.setFaults(rules);
  return { clock, emulator, client, registry, list, planner, matched, reads, listed, planned, faults };
}

describe('TaskList', () => {
  it('matches the first list to the handlers and hands the served tasks to the planner', async () => {
    const r = rig({ handlers: ['a', 'b', 'c'] });
    r.emulator.createTask({ key: 'a' });
    r.emulator.createTask({ key: 'b' });
    r.emulator.createTask({ key: 'not-mine' });
    await r.list.first(new AbortController().signal);
    r.list.plan(r.planner);
    expect(r.list.answered).toBe(true);
    expect(r.planned()).toEqual(['a', 'b']);
    expect(r.list.withoutTask).toEqual(['c']);
    expect(r.list.everyHandlerServed).toBe(false);
    expect(r.reads).toEqual(['read']);
    expect(r.matched).toEqual([{ served: ['a', 'b'], withoutTask: ['c'] }]);
  });

  it('retries the first list after 5xx answers with the back-off, on the clock', async () => {
    vi.spyOn(Math, 'random').mockReturnValue(0.5);
    const r = rig({ handlers: ['a'] });
    r.emulator.createTask({ key: 'a' });
    r.faults([{ operation: 'tasks.list', kind: 'status', status: 503, count: 2 }]);
    await runOnClock(r.clock, r.list.first(new AbortController().signal));
    // DF_RETRY_BASE_MS 100 with full jitter at 0.5: 50 ms, then 100 ms.
    expect(r.listed()).toEqual([
      { at: 0, status: 503 },
      { at: 50, status: 503 },
      { at: 150, status: 200 },
    ]);
    expect(r.list.answered).toBe(true);
    expect(r.registry.tasks.map((t) => t.task.key)).toEqual(['a']);
  });

  it('retries a first list refused with 429 when the budget pause ends', async () => {
    const r = rig({ handlers: ['a'] });
    r.emulator.createTask({ key: 'a' });
    r.faults([{ operation: 'tasks.list', kind: 'rateLimit', retryAfterSeconds: 3, count: 1 }]);
    await runOnClock(r.clock, r.list.first(new AbortController().signal));
    expect(r.listed()).toEqual([
      { at: 0, status: 429 },
      { at: 3_000, status: 200 },
    ]);
  });

  it('stops the start with a StartupError naming DF_API_KEY when the key is refused (401)', async () => {
    const r = rig({ handlers: ['a'] });
    r.faults([{ operation: 'tasks.list', kind: 'status', status: 401 }]);
    const error = await r.list.first(new AbortController().signal).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StartupError);
    expect((error as Error).message).toContain('DF_API_KEY');
    expect(r.listed()).toHaveLength(1);
    expect(r.list.answered).toBe(false);
  });

  it.each([
    [403, 'lacks permission'],
    [400, "could not list the service's tasks"],
  ])('stops the start at once on a %i answer', async (status, message) => {
    const r = rig({ handlers: ['a'] });
    r.faults([{ operation: 'tasks.list', kind: 'status', status }]);
    await expect(r.list.first(new AbortController().signal)).rejects.toThrow(message);
    expect(r.listed()).toHaveLength(1);
  });

  it('stops retrying the first list when its signal aborts', async () => {
    const r = rig({ handlers: ['a'] });
    r.faults([{ operation: 'tasks.list', kind: 'status', status: 503 }]);
    const stop = new AbortController();
    const first = r.list.first(stop.signal);
    first.catch(() => undefined);
    await driveClockUntil(r.clock, () => r.listed().length === 3);
    stop.abort(new Error('shutdown'));
    await expect(first).rejects.toThrow('shutdown');
    expect(r.clock.pending).toBe(0);
  });

  it('plans a task that appears on the service at the next refresh, every DF_TASK_REFRESH_MS', async () => {
    const r = rig({ handlers: ['a', 'b'] });
    r.emulator.createTask({ key: 'a' });
    await r.list.first(new AbortController().signal);
    r.list.plan(r.planner);
    const stop = new AbortController();
    const loop = r.list.refreshLoop(stop.signal);
    await r.clock.advance(REFRESH_MS - 1);
    expect(r.listed()).toHaveLength(1);
    r.emulator.createTask({ key: 'b' });
    await r.clock.advance(1);
    expect(r.listed().map((l) => l.at)).toEqual([0, REFRESH_MS]);
    expect(r.planned()).toEqual(['a', 'b']);
    expect(r.list.everyHandlerServed).toBe(true);
    expect(r.list.withoutTask).toEqual([]);
    stop.abort(new Error('stop'));
    await loop;
  });

  it('drops a task deleted on the service from the planner and the registry', async () => {
    const r = rig({ handlers: ['a', 'b'] });
    r.emulator.createTask({ key: 'a' });
    const b = r.emulator.createTask({ key: 'b' });
    await r.list.first(new AbortController().signal);
    r.list.plan(r.planner);
    expect(r.planned()).toEqual(['a', 'b']);
    await r.client.deleteTask(b.id);
    await r.list.refresh(new AbortController().signal);
    expect(r.planned()).toEqual(['a']);
    expect(r.registry.byId(b.id)).toBeUndefined();
    expect(r.list.withoutTask).toEqual(['b']);
  });

  it('keeps the current tasks when a refresh fails, and picks up the change at the next one', async () => {
    const r = rig({ handlers: ['a', 'b'] });
    r.emulator.createTask({ key: 'a' });
    await r.list.first(new AbortController().signal);
    r.list.plan(r.planner);
    r.emulator.createTask({ key: 'b' });
    r.faults([{ operation: 'tasks.list', kind: 'status', status: 500, count: 1 }]);
    const stop = new AbortController();
    const loop = r.list.refreshLoop(stop.signal);
    await r.clock.advance(REFRESH_MS);
    expect(r.listed().at(-1)).toEqual({ at: REFRESH_MS, status: 500 });
    expect(r.planned()).toEqual(['a']);
    await r.clock.advance(REFRESH_MS);
    expect(r.listed().at(-1)).toEqual({ at: 2 * REFRESH_MS, status: 200 });
    expect(r.planned()).toEqual(['a', 'b']);
    stop.abort(new Error('stop'));
    await loop;
  });

  it('refreshes daily once every handler is served, instead of every DF_TASK_REFRESH_MS', async () => {
    const r = rig({ handlers: ['a'] });
    r.emulator.createTask({ key: 'a' });
    await r.list.first(new AbortController().signal);
    r.list.plan(r.planner);
    const stop = new AbortController();
    const loop = r.list.refreshLoop(stop.signal);
    await r.clock.advance(MATCHED_TASK_REFRESH_MS - 1);
    expect(r.listed()).toHaveLength(1);
    await r.clock.advance(1);
    expect(r.listed().map((l) => l.at)).toEqual([0, MATCHED_TASK_REFRESH_MS]);
    stop.abort(new Error('stop'));
    await loop;
  });

  it('ends its refresh loop at once when its signal aborts', async () => {
    const r = rig({ handlers: ['a', 'b'] });
    r.emulator.createTask({ key: 'a' });
    await r.list.first(new AbortController().signal);
    const stop = new AbortController();
    let ended = false;
    const loop = r.list.refreshLoop(stop.signal).then(() => (ended = true));
    await r.clock.advance(10);
    stop.abort(new Error('stop'));
    await loop;
    expect(ended).toBe(true);
    expect(r.clock.pending).toBe(0);
    expect(r.listed()).toHaveLength(1);
  });

  it('creates a missing task on the service with task sync, and serves it', async () => {
    const r = rig({ handlers: ['a', 'b'], sync: true });
    r.emulator.createTask({ key: 'a' });
    await r.list.first(new AbortController().signal);
    r.list.plan(r.planner);
    expect(r.emulator.tasks().map((t) => t.key)).toEqual(['a', 'b']);
    expect(r.planned()).toEqual(['a', 'b']);
    expect(r.list.everyHandlerServed).toBe(true);
  });
});
