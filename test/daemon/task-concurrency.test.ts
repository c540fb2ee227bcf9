// defineTask({ concurrency }) through the standalone daemon: handlers loaded, their task matched on the
// service, and the scheduler keeping that task to its limit while the other task uses the slots left.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { TaskExecution } from '../../src/api/types.ts';
import { Journal } from '../../src/journal/journal.ts';
import { startHarness, TEST_KEY, waitFor, type Harness } from './harness.ts';

let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

/**
 * A task `one-at-a-time` of concurrency 1 whose executions each wait for their release, beside a task `other`,
 * within DF_CONCURRENCY 4; counts how many run at once.
 */
function heldHandlers() {
  const state = { running: 0, mostRunning: 0, releases: [] as Array<() => void> };
  const options = {
    settings: { concurrency: 4, 'budget.perSecond': 50, 'budget.perMinute': 1_000 },
    emulator: { limits: { perSecond: 50, perMinute: 1_000, perMonth: 40_000 } },
    handlers: [
      {
        key: 'one-at-a-time',
        concurrency: 1,
        handle: async () => {
          state.mostRunning = Math.max(state.mostRunning, ++state.running);
          await new Promise<void>((resolve) => state.releases.push(resolve));
          state.running--;
          return {};
        },
      },
      { key: 'other', handle: () => ({}) },
    ],
  };
  return Object.assign(state, { options });
}

describe('a task declaring concurrency', () => {
  it('runs one execution at a time within DF_CONCURRENCY 4, and is not polled while it runs', async () => {
    const gate = heldHandlers();
    const { releases } = gate;
    harness = await startHarness({
      ...gate.options,
    });
    const { emulator, worker } = harness;
    const single = emulator.tasks().find((t) => t.key === 'one-at-a-time')!;
    const pollsOfSingle = () =>
      emulator.requests().filter((r) => r.operation === 'tasks.poll' && r.path.includes(single.id)).length;
    for (let i = 0; i < 3; i++) emulator.enqueueExecution(single.id, {});
    worker.wake();
    await waitFor(() => gate.running === 1, 'the first execution to start');
    const pollsWhileFull = pollsOfSingle();
    // The other task is polled, claimed and reported meanwhile: the loop went round, the full task stayed out.
    const others = [1, 2, 3].map(() => emulator.enqueueExecution('other', {}).id);
    worker.wake();
    await waitFor(
      () => others.every((id) => (emulator.execution(id)?.reports.length ?? 0) > 0),
      'the other task to be served',
    );
    expect(pollsOfSingle()).toBe(pollsWhileFull);
    expect(gate.running).toBe(1);
    for (let released = 0; released < 3; released++) {
      await waitFor(() => releases.length > released, `execution ${released + 1} to start`);
      releases[released]!();
    }
    await waitFor(() => emulator.executions().every((e) => e.reports.length > 0), 'every execution reported');
    expect(gate.mostRunning).toBe(1);
  });

  it('replays the executions an earlier run left claimed within the same limit, one at a time', async () => {
    const gate = heldHandlers();
    const { releases } = gate;
    harness = await startHarness({
      ...gate.options,
      start: false,
    });
    const h = harness;
    // Three claims an earlier run journaled and died with, as the journal keeps them.
    const journal = await Journal.open(h.stateDir, { logger: { warn: () => undefined } });
    const claimed: string[] = [];
    for (let i = 0; i < 3; i++) {
      const queued = h.emulator.enqueueExecution('one-at-a-time', { i });
      const answer = await fetch(`${h.emulator.url}/v1/data-factory/tasks/${queued.taskId}/poll`, {
        headers: { 'x-api-key': TEST_KEY },
      });
      const execution = (await answer.json()) as TaskExecution;
      await journal.recordClaim({
        executionId: execution.id,
        taskId: execution.taskId,
        taskKey: 'one-at-a-time',
        input: execution.input,
        claimedAt: new Date().toISOString(),
      });
      claimed.push(execution.id);
    }
    await writeFile(
      join(h.stateDir, 'budget.json'),
      JSON.stringify({ monthKey: new Date().toISOString().slice(0, 7), used: 3, sentAt: [] }),
    );
    const others = [1, 2, 3].map(() => h.emulator.enqueueExecution('other', {}).id);
    await h.worker.start();
    h.worker.wake();
    await waitFor(() => gate.running === 1, 'the first replay to start');
    // The other task is served in the slots left while the replays wait for the task's one slot.
    await waitFor(
      () => others.every((id) => (h.emulator.execution(id)?.reports.length ?? 0) > 0),
      'the other task to be served',
    );
    expect(gate.running).toBe(1);
    for (let released = 0; released < 3; released++) {
      await waitFor(() => releases.length > released, `replay ${released + 1} to start`);
      releases[released]!();
    }
    await waitFor(
      () => claimed.every((id) => (h.emulator.execution(id)?.reports.length ?? 0) > 0),
      'every replay reported',
    );
    expect(gate.mostRunning).toBe(1);
  });
});
