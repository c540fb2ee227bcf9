// The daemon's behaviour against the emulator over loopback: validation, retries, timeouts, rate limits,
// server errors on report, refused reports, and a key refused after start.
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startHarness, waitFor, type Harness } from './harness.ts';

let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

const reported = (h: Harness, id: string) => h.emulator.executions().find((e) => e.id === id)?.reports ?? [];

describe('running executions', () => {
  it('fails an execution whose input lacks a declared key without calling the handler', async () => {
    let calls = 0;
    harness = await startHarness({
      handlers: [
        {
          key: 'enrich',
          inputKeys: ['sku', 'price'],
          handle: () => {
            calls++;
            return {};
          },
        },
      ],
    });
    const e = harness.emulator.enqueueExecution('enrich', { sku: 'A-1' });
    harness.worker.wake();
    await waitFor(() => reported(harness!, e.id).length > 0, 'the report');
    expect(reported(harness, e.id)[0]).toMatchObject({
      status: 'FAILED',
      output: { missingInputKeys: ['price'], error: expect.stringContaining('"price"') as unknown },
    });
    expect(calls).toBe(0);
  });

  it('hands the service context to the handler as ctx.job, not as an input key', async () => {
    let seen: unknown;
    harness = await startHarness({
      handlers: [
        {
          key: 'ctx',
          inputKeys: ['a'],
          outputKeys: ['keys'],
          handle: (input, ctx) => {
            seen = ctx.job;
            return { keys: Object.keys(input) };
          },
        },
      ],
    });
    const e = harness.emulator.enqueueExecution('ctx', { a: 1 }, { jobId: 'job-9', userId: 'u-1' });
    harness.worker.wake();
    await waitFor(() => reported(harness!, e.id).length > 0, 'the report');
    expect(reported(harness, e.id)[0]?.output).toEqual({ keys: ['a'] });
    expect(seen).toMatchObject({ jobId: 'job-9', userId: 'u-1' });
  });

  it('fails an execution whose handler output lacks a declared key', async () => {
    harness = await startHarness({
      handlers: [{ key: 'out', outputKeys: ['total', 'currency'], handle: () => ({ total: 3 }) }],
    });
    const e = harness.emulator.enqueueExecution('out', {});
    harness.worker.wake();
    await waitFor(() => reported(harness!, e.id).length > 0, 'the report');
    expect(reported(harness, e.id)[0]).toMatchObject({
      status: 'FAILED',
      output: { missingOutputKeys: ['currency'] },
    });
  });

  it('reports FAILED after retryCount + 1 attempts of a throwing handler, with the message and no stack', async () => {
    let attempts = 0;
    harness = await startHarness({
      handlers: [
        {
          key: 'flaky',
          retryCount: 2,
          handle: () => {
            attempts++;
            throw new Error(`warehouse API down (attempt ${attempts})`);
          },
        },
      ],
    });
    const e = harness.emulator.enqueueExecution('flaky', {});
    harness.worker.wake();
    await waitFor(() => reported(harness!, e.id).length > 0, 'the report');
    expect(attempts).toBe(3);
    const report = reported(harness, e.id)[0]!;
    expect(report).toMatchObject({
      status: 'FAILED',
      output: { error: 'warehouse API down (attempt 3)', attempts: 3 },
    });
    expect(JSON.stringify(report.output)).not.toMatch(/\bat .*\.ts:\d+/);
  });

  it('times out a handler that never settles and reports FAILED', async () => {
    harness = await startHarness({
      handlers: [{ key: 'stuck', timeoutMs: 150, handle: () => new Promise(() => undefined) }],
    });
    const e = harness.emulator.enqueueExecution('stuck', {});
    harness.worker.wake();
    await waitFor(() => reported(harness!, e.id).length > 0, 'the report');
    expect(reported(harness, e.id)[0]).toMatchObject({
      status: 'FAILED',
      output: { error: expect.stringMatching(/150 ms/) as unknown },
    });
  });

  it('polls a task again at once after a hit, draining a backlog without waiting for the idle pace', async () => {
    harness = await startHarness({ handlers: [{ key: 'echo', handle: (i) => i }] });
    const ids = [1, 2, 3, 4, 5].map((n) => harness!.emulator.enqueueExecution('echo', { n }).id);
    harness.worker.wake();
    await waitFor(() => ids.every((id) => reported(harness!, id).length === 1), 'five reports', 8_000);
    expect(harness.worker.readiness().ready).toBe(true);
  });
});

describe('the service misbehaving', () => {
  it('pauses every request for Retry-After after a 429, then carries on', async () => {
    harness = await startHarness({ handlers: [{ key: 'echo', handle: (i) => i }] });
    const { emulator } = harness;
    emulator.setFaults([{ operation: 'tasks.poll', kind: 'rateLimit', retryAfterSeconds: 1, count: 1 }]);
    const e = emulator.enqueueExecution('echo', { x: 1 });
    harness.worker.wake();
    await waitFor(() => reported(harness!, e.id).length > 0, 'the report', 8_000);
    const log = emulator.requests();
    const limited = log.findIndex((r) => r.status === 429);
    expect(limited).toBeGreaterThanOrEqual(0);
    const next = log[limited + 1]!;
    expect(next.at - log[limited]!.at).toBeGreaterThanOrEqual(950);
    expect(log.filter((r) => r.status === 429)).toHaveLength(1);
    // One warning for the one 429, whichever part of the worker sent the request.
    const warnings = harness.logs.filter((l) => l.msg === 'the service answered 429 RATE_LIMIT');
    expect(warnings).toEqual([expect.objectContaining({ operation: 'tasks.poll' })]);
  });

  it('pauses for DF_RATE_LIMIT_PAUSE_MS after a 429 without Retry-After', async () => {
    harness = await startHarness({
      handlers: [{ key: 'echo', handle: (i) => i }],
      settings: { 'scheduler.rateLimitPauseMs': 700 },
    });
    const { emulator } = harness;
    emulator.setFaults([{ operation: 'executions.report', kind: 'rateLimit', count: 1 }]);
    const e = emulator.enqueueExecution('echo', { x: 1 });
    harness.worker.wake();
    await waitFor(() => reported(harness!, e.id).length > 0, 'the report', 8_000);
    const log = emulator.requests();
    const limited = log.findIndex((r) => r.status === 429);
    expect(log[limited + 1]!.at - log[limited]!.at).toBeGreaterThanOrEqual(650);
    expect(reported(harness, e.id)).toHaveLength(1);
  });

  it('pauses every request after a 429 on a task list refresh too, not only on polls and reports', async () => {
    harness = await startHarness({
      settings: { 'scheduler.taskRefreshMs': 300, 'scheduler.minPollIntervalMs': 0 },
      // A handler without its task keeps the list refreshed every DF_TASK_REFRESH_MS (else daily).
      handlers: [
        { key: 'echo', handle: (i) => i },
        { key: 'not-yet-created', handle: (i) => i },
      ],
      withoutTask: ['not-yet-created'],
    });
    const { emulator, worker } = harness;
    emulator.setFaults([{ operation: 'tasks.list', kind: 'rateLimit', retryAfterSeconds: 1, count: 1 }]);
    await waitFor(() => emulator.requests().some((r) => r.status === 429), 'the refused refresh');
    // Work arrives during the pause: its poll waits for the pause to end.
    emulator.enqueueExecution('echo', { n: 1 });
    worker.wake();
    await waitFor(
      () => emulator.requests().some((r) => r.operation === 'tasks.poll' && r.status === 200),
      'the poll',
    );
    const log = emulator.requests();
    const limited = log.findIndex((r) => r.status === 429);
    expect(log[limited + 1]!.at - log[limited]!.at).toBeGreaterThanOrEqual(950);
  });

  it('retries a report answered 5xx until the service accepts it, reporting exactly once', async () => {
    harness = await startHarness({ handlers: [{ key: 'echo', handle: (i) => i }] });
    const { emulator } = harness;
    emulator.setFaults([{ operation: 'executions.report', kind: 'status', status: 503, count: 2 }]);
    const e = emulator.enqueueExecution('echo', { x: 7 });
    harness.worker.wake();
    await waitFor(() => reported(harness!, e.id).length > 0, 'the report', 8_000);
    const patches = emulator.requests().filter((r) => r.operation === 'executions.report');
    expect(patches.map((p) => p.status)).toEqual([503, 503, 200]);
    expect(reported(harness, e.id)).toEqual([
      expect.objectContaining({ status: 'COMPLETED', output: { x: 7 } }),
    ]);
    // The worker records the report's attempts once the journal is updated, just after the service saw it.
    await expect
      .poll(() => harness!.worker.metrics.render())
      .toMatch(/dfworker_report_attempts_sum\{task="echo"\} 3/);
  });

  it('moves a report the service refuses for good (404) to the dead-letter folder and keeps serving', async () => {
    harness = await startHarness({ handlers: [{ key: 'echo', handle: (i) => i }] });
    const { emulator } = harness;
    emulator.setFaults([
      {
        operation: 'executions.report',
        kind: 'status',
        status: 404,
        body: JSON.stringify({ code: 'NOT_FOUND', message: 'no such execution', httpStatusCode: 404 }),
        contentType: 'application/json',
        count: 1,
      },
    ]);
    const first = emulator.enqueueExecution('echo', { n: 1 });
    harness.worker.wake();
    const deadDir = join(harness.stateDir, 'dead-letter');
    await waitFor(
      () =>
        harness!.logs.some((l) => l.msg === 'service refused the report for good; moving it to dead letters'),
      'the refusal',
    );
    await waitFor(() => (harness?.worker.readiness().ready ?? false) === true, 'ready');
    const second = emulator.enqueueExecution('echo', { n: 2 });
    harness.worker.wake();
    await waitFor(() => reported(harness!, second.id).length > 0, 'the second report');
    const dead = await readdir(deadDir);
    expect(dead).toHaveLength(1);
    expect(reported(harness, first.id)).toEqual([]);
  });

  it('stops polling and becomes not ready when the key is refused after start, and recovers', async () => {
    harness = await startHarness({ handlers: [{ key: 'echo', handle: (i) => i }] });
    const { emulator, worker } = harness;
    expect(worker.readiness().ready).toBe(true);
    emulator.setFaults([
      {
        kind: 'status',
        status: 401,
        body: JSON.stringify({ code: 'UNAUTHENTICATED', message: 'invalid key', httpStatusCode: 401 }),
        contentType: 'application/json',
      },
    ]);
    worker.wake();
    await waitFor(() => !worker.readiness().ready, 'not ready');
    expect(worker.readiness().checks.service?.reason).toMatch(/401/);
    const refusedPolls = emulator.requests().filter((r) => r.status === 401).length;
    emulator.clearFaults();
    const e = emulator.enqueueExecution('echo', { back: true });
    // The slow retry (DF_ERROR_BACKOFF_MAX_MS, 200 ms here) finds the key accepted again.
    await waitFor(() => reported(harness!, e.id).length > 0, 'the report after recovery', 8_000);
    expect(worker.readiness().ready).toBe(true);
    expect(refusedPolls).toBeLessThanOrEqual(2);
  });
});
