// Which tasks are polled: matching handlers to the service's tasks, task sync, refresh, and backpressure.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { startHarness, waitFor, type Harness } from './harness.ts';

let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

describe('tasks served by the daemon', () => {
  it('reports a handler whose task is missing on the service, and leaves tasks without a handler alone', async () => {
    harness = await startHarness({ handlers: [{ key: 'orphan', handle: () => ({}) }], createTasks: false });
    harness.emulator.createTask({ key: 'someone-elses-task' });
    expect(harness.logs).toContainEqual(
      expect.objectContaining({
        taskKey: 'orphan',
        msg: expect.stringMatching(/no task on the service/) as unknown,
      }),
    );
    // Nothing to poll: no task is served, so waking the scheduler sends nothing.
    expect((await harness.worker.metrics.tasksServed.get()).values[0]?.value).toBe(0);
    // /readyz names the handler without its task, and stays ready: the alerts report it.
    expect(harness.worker.readiness()).toMatchObject({
      ready: true,
      tasks: { served: [], withoutTask: ['orphan'] },
    });
    // The alert DfWorkerHandlerWithoutTask reads this series.
    expect((await harness.worker.metrics.handlerTaskMissing.get()).values).toEqual([
      expect.objectContaining({ labels: { task: 'orphan' }, value: 1 }),
    ]);
    expect(harness.worker.wake()).toBe(0);
    expect(harness.emulator.requests().filter((r) => r.operation === 'tasks.poll')).toEqual([]);
  });

  it('creates the missing task with its declared keys and retryCount when task sync is on, then serves it', async () => {
    harness = await startHarness({
      handlers: [
        {
          key: 'synced',
          retryCount: 2,
          description: 'made by sync',
          inputKeys: [{ key: 'a', description: 'first' }],
          outputKeys: ['b'],
          handle: (i) => ({ b: i.a }),
        },
      ],
      createTasks: false,
      settings: { 'tasks.sync': true },
    });
    const created = harness.emulator.requests().filter((r) => r.operation === 'tasks.create');
    expect(created).toHaveLength(1);
    const e = harness.emulator.enqueueExecution('synced', { a: 5 });
    const task = harness.emulator.executions().find((x) => x.id === e.id);
    expect(task?.taskKey).toBe('synced');
    harness.worker.wake();
    await waitFor(() => harness!.emulator.executions()[0]!.reports.length > 0, 'the report');
    expect(harness.emulator.executions()[0]!.reports[0]!.output).toEqual({ b: 5 });
  });

  it('picks up a task created on the service after start at the next task-list refresh', async () => {
    harness = await startHarness({
      handlers: [{ key: 'late', handle: () => ({ ok: true }) }],
      createTasks: false,
      settings: { 'scheduler.taskRefreshMs': 200 },
    });
    expect((await harness.worker.metrics.handlerTaskMissing.get()).values).toEqual([
      expect.objectContaining({ labels: { task: 'late' }, value: 1 }),
    ]);
    harness.emulator.createTask({ key: 'late' });
    const e = harness.emulator.enqueueExecution('late', {});
    await waitFor(
      () => harness!.logs.some((l) => l.msg === 'serving task' && l.taskKey === 'late'),
      'refresh',
    );
    // The refresh that found the task clears the handler's missing-task series.
    await vi.waitFor(async () =>
      expect((await harness!.worker.metrics.handlerTaskMissing.get()).values).toEqual([]),
    );
    harness.worker.wake();
    await waitFor(
      () => harness!.emulator.executions().find((x) => x.id === e.id)!.reports.length > 0,
      'report',
    );
    // 200 ms between refreshes would spend the month on task lists: the start says so.
    expect(harness.logs.find((l) => String(l.msg).startsWith('DF_TASK_REFRESH_MS makes'))).toMatchObject({
      level: 40,
      refreshesPerMonth: 12_960_000,
    });
  });

  it('does not warn about the task refresh at its default of one hour', async () => {
    harness = await startHarness({ handlers: [{ key: 'late', handle: () => ({ ok: true }) }] });
    expect(harness.logs.some((l) => String(l.msg).startsWith('DF_TASK_REFRESH_MS makes'))).toBe(false);
  });

  it('claims an execution only while a handler slot is free (concurrency 1)', async () => {
    harness = await startHarness({
      handlers: [
        {
          key: 'slow',
          handle: async () => {
            await new Promise((resolve) => setTimeout(resolve, 250));
            return {};
          },
        },
      ],
      settings: { concurrency: 1 },
    });
    for (let i = 0; i < 3; i++) harness.emulator.enqueueExecution('slow', { i });
    harness.worker.wake();
    await waitFor(() => harness!.emulator.executions().every((e) => e.reports.length > 0), 'three reports');
    const spans = harness.emulator
      .executions()
      .map((e) => [Date.parse(e.claimedAt!), Date.parse(e.reports[0]!.at)] as const)
      .sort((a, b) => a[0] - b[0]);
    for (let i = 1; i < spans.length; i++) {
      // The next claim comes only after the previous execution was reported.
      expect(spans[i]![0]).toBeGreaterThanOrEqual(spans[i - 1]![1]);
    }
  });
});
