// A poll that left but whose answer never arrived in full may have claimed an execution on the service that
// this worker will never run or report: the worker counts it and logs where an operator should look.
import { afterEach, describe, expect, it } from 'vitest';
import type { FaultRule } from '../../src/emulator/index.ts';
import { startHarness, TEST_KEY, waitFor, type Harness } from './harness.ts';

let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

const LOST = /^poll answer lost/;

/** A worker for task `enrich` with one execution pending, its first poll meeting `fault`. */
async function workerWithFaultyFirstPoll(
  fault: FaultRule,
  settings: Record<string, unknown> = {},
): Promise<{ h: Harness; executionId: string }> {
  const h = await startHarness({
    start: false,
    settings,
    handlers: [{ key: 'enrich', inputKeys: [], outputKeys: [], handle: () => ({}) }],
  });
  harness = h;
  const queued = h.emulator.enqueueExecution('enrich', {});
  h.emulator.setFaults([{ ...fault, operation: 'tasks.poll', count: 1 }]);
  await h.worker.start();
  return { h, executionId: queued.id };
}

const lostLogs = (h: Harness) => h.logs.filter((l) => typeof l.msg === 'string' && LOST.test(l.msg));

/** The count for task `enrich` and `reason`, or summed over every reason; undefined when not exposed. */
async function lostCount(h: Harness, reason?: string): Promise<string | undefined> {
  const text = await h.worker.metrics.render();
  const counts = [
    ...text.matchAll(/^dfworker_poll_answers_lost_total\{task="enrich",reason="([^"]+)"\} (\d+)$/gm),
  ]
    .filter(([, r]) => reason === undefined || r === reason)
    .map(([, , count]) => Number(count));
  return counts.length === 0 ? undefined : String(counts.reduce((a, b) => a + b, 0));
}

describe('a poll answer lost after the poll was sent', () => {
  it('is counted and logged naming the task and the time when the connection closes after the claim', async () => {
    const { h, executionId } = await workerWithFaultyFirstPoll({ kind: 'dropAfterApply' });
    await waitFor(() => lostLogs(h).length > 0, 'the lost-answer log line');

    const [log] = lostLogs(h);
    expect(log).toMatchObject({
      level: 50,
      taskKey: 'enrich',
      taskId: expect.any(String) as unknown,
      polledAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) as unknown,
      lostAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) as unknown,
    });
    expect(log!.msg).toMatch(/the service may hold an execution of this task claimed by this worker/);
    expect(JSON.stringify(h.logs)).not.toContain(TEST_KEY);
    expect(await lostCount(h, 'connection')).toBe('1');
    expect(await lostCount(h)).toBe('1');
    // What the log warns of: the service handed the execution out, and it is never reported.
    const execution = h.emulator.executions().find((e) => e.id === executionId);
    expect(execution).toMatchObject({ claimedAt: expect.any(String) as unknown, reports: [] });
  });

  it('is counted when the poll times out waiting for the answer', async () => {
    // The service holds the poll 1 s before it claims; the worker gives up at 200 ms and cannot tell.
    const { h } = await workerWithFaultyFirstPoll(
      { kind: 'latency', ms: 1_000 },
      { 'api.requestTimeoutMs': 200 },
    );
    await waitFor(() => lostLogs(h).length > 0, 'the lost-answer log line');
    expect(lostLogs(h)[0]).toMatchObject({
      taskKey: 'enrich',
      err: { type: 'TimeoutError', phase: 'request', sent: true },
    });
    expect(await lostCount(h, 'timeout')).toBe('1');
  });

  it('is not counted when the service answered with an error status', async () => {
    const { h } = await workerWithFaultyFirstPoll({ kind: 'status', status: 503 });
    await waitFor(() => h.logs.some((l) => l.msg === 'poll failed; backing off'), 'the poll failure');
    expect(lostLogs(h)).toEqual([]);
    // Present at 0 from the start (so an increase() alert sees the first one), and still 0.
    expect(await lostCount(h)).toBe('0');
  });
});
