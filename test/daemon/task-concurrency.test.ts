// defineTask({ concurrency }) through the standalone daemon: handlers loaded, their task matched on the
// service, and the scheduler keeping that task to its limit while the other task uses the slots left.
import { afterEach, describe, expect, it } from 'vitest';
import { startHarness, waitFor, type Harness } from './harness.ts';

let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

describe('a task declaring concurrency', () => {
  it('runs one execution at a time within DF_CONCURRENCY 4, and is not polled while it runs', async () => {
    let running = 0;
    let mostRunning = 0;
    const releases: Array<() => void> = [];
    harness = await startHarness({
      settings: { concurrency: 4, 'budget.perSecond': 50, 'budget.perMinute': 1_000 },
      emulator: { limits: { perSecond: 50, perMinute: 1_000, perMonth: 40_000 } },
      handlers: [
        {
          key: 'one-at-a-time',
          concurrency: 1,
          handle: async () => {
            mostRunning = Math.max(mostRunning, ++running);
            await new Promise<void>((resolve) => releases.push(resolve));
            running--;
            return {};
          },
        },
        { key: 'other', handle: () => ({}) },
      ],
    });
    const { emulator, worker } = harness;
    const single = emulator.tasks().find((t) => t.key === 'one-at-a-time')!;
    const pollsOfSingle = () =>
      emulator.requests().filter((r) => r.operation === 'tasks.poll' && r.path.includes(single.id)).length;
    for (let i = 0; i < 3; i++) emulator.enqueueExecution(single.id, {});
    worker.wake();
    await waitFor(() => running === 1, 'the first execution to start');
    const pollsWhileFull = pollsOfSingle();
    // The other task is polled, claimed and reported meanwhile: the loop went round, the full task stayed out.
    const others = [1, 2, 3].map(() => emulator.enqueueExecution('other', {}).id);
    worker.wake();
    await waitFor(
      () => others.every((id) => (emulator.execution(id)?.reports.length ?? 0) > 0),
      'the other task to be served',
    );
    expect(pollsOfSingle()).toBe(pollsWhileFull);
    expect(running).toBe(1);
    for (let released = 0; released < 3; released++) {
      await waitFor(() => releases.length > released, `execution ${released + 1} to start`);
      releases[released]!();
    }
    await waitFor(() => emulator.executions().every((e) => e.reports.length > 0), 'every execution reported');
    expect(mostRunning).toBe(1);
  });
});
