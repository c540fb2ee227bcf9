// The poll loop on the manual clock, against the emulator answering in process: one task's poll whose answer
// never comes holds back neither the other tasks' polls nor shutdown.
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { ServiceClient, type ServiceTransport } from '../../src/api/client.ts';
import type { Answer } from '../../src/api/response.ts';
import type { TaskExecution } from '../../src/api/types.ts';
import { Budget } from '../../src/budget/budget.ts';
import { ManualClock, flushMicrotasks } from '../../src/clock/manual-clock.ts';
import { Emulator } from '../../src/emulator/index.ts';
import { PollPlanner } from '../../src/scheduler/poll-planner.ts';
import { Scheduler, type PollAnswerLoss, type PolledTask } from '../../src/scheduler/scheduler.ts';
import { WorkerEvents } from '../../src/events/worker-events.ts';

const API_KEY = 'scheduler-test-key';

/** Carries requests to the emulator in process; a poll of `stalled` is handled but its answer never returns. */
function stallingTransport(emulator: Emulator, stalled: () => string): ServiceTransport & { held: number } {
  const transport = {
    held: 0,
    async send(
      _operation: string,
      request: { method: string; path: string; headers: Record<string, string>; body?: unknown },
      signal?: AbortSignal,
    ): Promise<Answer> {
      const answer = await emulator.answer({
        method: request.method,
        path: request.path,
        headers: request.headers,
        ...(typeof request.body === 'string' ? { body: request.body } : {}),
      });
      if (!answer) throw new Error('dropped');
      if (request.path.includes(`/tasks/${stalled()}/poll`)) {
        transport.held++;
        // Claimed on the service, the answer on its way for ever: only the caller's signal ends the wait.
        await new Promise<never>((_, reject) => {
          signal?.addEventListener('abort', () => reject(signal.reason as Error), { once: true });
        });
      }
      return { status: answer.status, headers: answer.headers, text: answer.body ?? '' };
    },
    close: () => Promise.resolve(),
  };
  return transport;
}

function setup(concurrency: number) {
  const clock = new ManualClock(Date.UTC(2026, 10, 27, 12));
  const emulator = new Emulator({ clock, apiKeys: [API_KEY], limits: { perSecond: 100, perMinute: 6_000 } });
  const slow = emulator.createTask({ key: 'slow' });
  const busy = emulator.createTask({ key: 'busy' });
  const budget = new Budget({
    limits: { perSecond: 100, perMinute: 6_000, perMonth: 1_000_000 },
    clock,
    safetyMarginMs: 0,
  });
  const transport = stallingTransport(emulator, () => slow.id);
  const client = new ServiceClient({
    baseUrl: 'http://service.invalid',
    apiKey: API_KEY,
    gate: budget,
    transport,
  });
  const planner = new PollPlanner({
    budget,
    maxPollIntervalMs: 1_000,
    errorBackoff: { baseMs: 100, maxMs: 1_000 },
  });
  planner.setTasks(
    [
      { id: slow.id, key: 'slow' },
      { id: busy.id, key: 'busy' },
    ],
    clock.now(),
  );
  const dispatched: string[] = [];
  const lost: { task: string; reason: PollAnswerLoss }[] = [];
  const cut = new AbortController();
  const events = new WorkerEvents();
  events.on('pollAnswerLost', ({ task, reason }) => lost.push({ task, reason }));
  const scheduler = new Scheduler({
    client,
    planner,
    clock,
    logger: pino({ level: 'silent' }),
    concurrency,
    unauthorizedRetryMs: 60_000,
    cutPolls: cut.signal,
    dispatch: (task: PolledTask, execution: TaskExecution) => {
      dispatched.push(`${task.key}:${execution.id}`);
      return Promise.resolve();
    },
    events,
  });
  return { clock, emulator, scheduler, transport, dispatched, lost, cut };
}

describe('Scheduler', () => {
  it("claims another task's executions while one task's poll answer never comes", async () => {
    const { clock, emulator, scheduler, transport, dispatched } = setup(2);
    emulator.enqueueExecution('slow', {});
    const busy = [1, 2, 3].map(() => emulator.enqueueExecution('busy', {}).id);
    const stop = new AbortController();
    const running = scheduler.run(stop.signal);
    for (let i = 0; i < 20 && dispatched.length < busy.length; i++) {
      await flushMicrotasks(10);
      await clock.advance(100);
    }
    expect(transport.held).toBe(1);
    expect(dispatched).toEqual(busy.map((id) => `busy:${id}`));
    stop.abort(new Error('test over'));
    await running;
  });

  it('counts a poll still unanswered when the shutdown cuts it as lost (reason shutdown), and then drains', async () => {
    const { clock, emulator, scheduler, transport, lost, cut } = setup(2);
    emulator.enqueueExecution('slow', {});
    const stop = new AbortController();
    const running = scheduler.run(stop.signal);
    while (transport.held === 0) {
      await flushMicrotasks(10);
      await clock.advance(100);
    }
    stop.abort(new Error('stopping'));
    await running;
    let drained = false;
    const draining = scheduler.drained().then(() => (drained = true));
    await flushMicrotasks(10);
    expect(drained).toBe(false); // the sent poll is owed its answer until the cut
    cut.abort(new Error('shutdown flush window over'));
    await draining;
    expect(lost).toEqual([{ task: 'slow', reason: 'shutdown' }]);
  });

  it('holds a slot for each poll out: never more polls and executions than the concurrency', async () => {
    const { clock, emulator, scheduler, transport, dispatched } = setup(1);
    emulator.enqueueExecution('slow', {});
    emulator.enqueueExecution('busy', {});
    const stop = new AbortController();
    const running = scheduler.run(stop.signal);
    for (let i = 0; i < 20; i++) {
      await flushMicrotasks(10);
      await clock.advance(100);
    }
    // With one slot, the stalled poll holds it: the other task waits (the daemon's DF_CONCURRENCY bound).
    expect(transport.held).toBe(1);
    expect(dispatched).toEqual([]);
    stop.abort(new Error('test over'));
    await running;
  });
});
