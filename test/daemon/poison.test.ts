// Poison executions: a replay whose earlier runs all died with the daemon is reported FAILED without running
// it again once they reach DF_MAX_CRASHES_PER_EXECUTION, and the replay never holds back other tasks' polls.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import type { JsonObject, TaskExecution } from '../../src/api/types.ts';
import { Journal } from '../../src/journal/journal.ts';
import { startHarness, TEST_KEY, waitFor, type Harness } from './harness.ts';

const quiet = { warn: () => undefined };
let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

/** A claim an earlier run journaled and died `starts` times running (its record still says claimed). */
async function diedRunning(
  h: Harness,
  taskKey: string,
  input: JsonObject,
  starts: number,
): Promise<TaskExecution> {
  const queued = h.emulator.enqueueExecution(taskKey, input);
  const answer = await fetch(`${h.emulator.url}/v1/data-factory/tasks/${queued.taskId}/poll`, {
    headers: { 'x-api-key': TEST_KEY },
  });
  const execution = (await answer.json()) as TaskExecution;
  const journal = await Journal.open(h.stateDir, { logger: quiet });
  await journal.recordClaim({
    executionId: execution.id,
    taskId: execution.taskId,
    taskKey,
    input: execution.input,
    claimedAt: new Date().toISOString(),
  });
  for (let i = 1; i < starts; i++) await journal.recordStart(execution.id);
  // The run that claimed it kept its budget too: a journal without budget.json is lost state (a minute's wait).
  await writeFile(
    join(h.stateDir, 'budget.json'),
    JSON.stringify({ monthKey: new Date().toISOString().slice(0, 7), used: 100, sentAt: [] }),
  );
  return execution;
}

const reportsOf = (h: Harness, id: string) => h.emulator.executions().find((e) => e.id === id)?.reports ?? [];

describe('poison executions', () => {
  it('reports FAILED without running it a replayed execution whose runs died DF_MAX_CRASHES_PER_EXECUTION times', async () => {
    const runs: string[] = [];
    harness = await startHarness({
      settings: { 'journal.maxCrashesPerExecution': 3 },
      handlers: [
        {
          key: 'crashy',
          handle: (_input, ctx) => {
            runs.push(ctx.execution.id);
            return {};
          },
        },
      ],
      start: false,
    });
    const poison = await diedRunning(harness, 'crashy', { n: 1 }, 3);
    const survivor = await diedRunning(harness, 'crashy', { n: 2 }, 2);
    await harness.worker.start();
    await waitFor(
      () => reportsOf(harness!, poison.id).length > 0 && reportsOf(harness!, survivor.id).length > 0,
      'both replayed executions reported',
    );
    expect(reportsOf(harness, poison.id)[0]).toMatchObject({
      status: 'FAILED',
      output: { errorName: 'PoisonExecution' },
    });
    expect(String(reportsOf(harness, poison.id)[0]?.output?.error)).toMatch(
      /died 3 times.*DF_MAX_CRASHES_PER_EXECUTION=3/,
    );
    // Below the limit it is run again, once.
    expect(reportsOf(harness, survivor.id)[0]?.status).toBe('COMPLETED');
    expect(runs).toEqual([survivor.id]);
  });

  it('counts a rerun as a start in the journal before running it', async () => {
    let startsSeen: number | undefined;
    harness = await startHarness({
      handlers: [
        {
          key: 'peek',
          handle: async (_input, ctx) => {
            const journal = await Journal.open(harness!.stateDir, { logger: quiet });
            startsSeen = (await journal.pending()).find((e) => e.executionId === ctx.execution.id)?.starts;
            return {};
          },
        },
      ],
      start: false,
    });
    const execution = await diedRunning(harness, 'peek', {}, 1);
    await harness.worker.start();
    await waitFor(() => reportsOf(harness!, execution.id).length > 0, 'the replayed report');
    expect(startsSeen).toBe(2);
  });

  it('polls and serves other tasks while a slow replayed execution runs', async () => {
    harness = await startHarness({
      settings: { concurrency: 2, 'scheduler.minPollIntervalMs': 50 },
      handlers: [
        { key: 'slow', handle: () => sleep(1_500).then(() => ({})) },
        { key: 'quick', handle: (input) => input },
      ],
      start: false,
    });
    const replayed = await diedRunning(harness, 'slow', {}, 1);
    const quick = harness.emulator.enqueueExecution('quick', { n: 7 });
    const started = Date.now();
    await harness.worker.start();
    harness.worker.wake();
    await waitFor(() => reportsOf(harness!, quick.id).length > 0, 'the other task served');
    const quickServedAfterMs = Date.now() - started;
    expect(reportsOf(harness, replayed.id)).toEqual([]);
    expect(quickServedAfterMs).toBeLessThan(1_500);
    await waitFor(() => reportsOf(harness!, replayed.id).length > 0, 'the replayed report');
  });
});

describe('replay after a crash without isolation', () => {
  it('reruns the executions that were running one at a time, and claims nothing until they ended', async () => {
    let running = 0;
    let most = 0;
    const reserves: number[] = [];
    harness = await startHarness({
      settings: { 'handlers.isolation': 'none', concurrency: 4, 'scheduler.minPollIntervalMs': 20 },
      handlers: [
        {
          key: 'suspect',
          handle: async () => {
            most = Math.max(most, ++running);
            reserves.push(harness!.worker.budget!.reportReserve);
            await sleep(150);
            running--;
            return {};
          },
        },
      ],
      start: false,
    });
    const replayed = [
      await diedRunning(harness, 'suspect', { n: 1 }, 1),
      await diedRunning(harness, 'suspect', { n: 2 }, 2),
      await diedRunning(harness, 'suspect', { n: 3 }, 1),
    ];
    const fresh = harness.emulator.enqueueExecution('suspect', { n: 4 });
    const polls = () => harness!.emulator.requests().filter((r) => r.operation === 'tasks.poll');
    const pollsBefore = polls().length;
    await harness.worker.start();
    harness.worker.wake();
    await waitFor(() => replayed.every((e) => reportsOf(harness!, e.id).length > 0), 'the replays');
    const lastReplayReport = Math.max(...replayed.map((e) => Date.parse(reportsOf(harness!, e.id)[0]!.at)));
    expect(most).toBe(1);
    // No poll went out before the last replay was reported; then the fresh execution is claimed.
    expect(
      polls()
        .slice(pollsBefore)
        .every((r) => r.at >= lastReplayReport),
    ).toBe(true);
    await waitFor(() => reportsOf(harness!, fresh.id).length > 0, 'the fresh execution');
    // The budget's report reserve (2 per execution owed a report, and 2 for the next claim) counts the
    // suspects still waiting their turn as much as the one that runs, then only what runs: a poll never takes
    // the room a replayed execution's report needs, and an idle worker holds back 2 requests, not 2 per slot.
    expect(reserves).toEqual([8, 6, 4, 4]);
    await waitFor(() => harness!.worker.budget!.reportReserve === 2, 'the reserve of an idle worker');
  });
});
