// The Reporter gives a report up only on the service's own refusal: a failure before anything was sent is
// retried, because the service has not seen the report.
import { mkdtemp, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { ServiceClient } from '../../src/api/client.ts';
import { Budget } from '../../src/budget/budget.ts';
import { fileBudgetStore } from '../../src/budget/store.ts';
import { systemClock } from '../../src/clock/clock.ts';
import { Emulator } from '../../src/emulator/index.ts';
import { Reporter } from '../../src/reports/reporter.ts';

const KEY = 'reporter-test-key';
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

describe('Reporter', () => {
  it('retries a report whose budget usage could not be saved, instead of dead-lettering what was never sent', async () => {
    const emulator = new Emulator({ apiKeys: [KEY] });
    const url = await emulator.listen();
    const stateDir = await mkdtemp(join(tmpdir(), 'df-worker-reporter-'));
    const parked = `${stateDir}.away`;
    cleanups.push(async () => {
      await emulator.close();
      await rm(parked, { recursive: true, force: true });
      await rm(stateDir, { recursive: true, force: true });
    });
    // A lease of 1: every request first saves the month's usage to state/budget.json.
    const budget = new Budget({
      limits: { perSecond: 50, perMinute: 3_000, perMonth: 40_000 },
      clock: systemClock,
      store: fileBudgetStore(stateDir),
      leaseSize: 1,
    });
    const client = new ServiceClient({ baseUrl: url, apiKey: KEY, gate: budget });
    cleanups.push(() => client.close());
    const queued = emulator.enqueueExecution(emulator.createTask({ key: 't' }).id, {});
    const execution = await client.pollTask(queued.taskId);
    expect(execution?.id).toBe(queued.id);

    // The state folder goes away (a volume failing): saving the usage fails, so nothing can be sent.
    await rename(stateDir, parked);
    await writeFile(stateDir, 'not a folder\n');
    const reporter = new Reporter({
      client,
      clock: systemClock,
      logger: pino({ level: 'silent' }),
      backoff: { baseMs: 20, maxMs: 50 },
    });
    const failures: unknown[] = [];
    const reporting = reporter.report(queued.id, { status: 'COMPLETED', output: { ok: true } }, undefined, {
      onRetry: () => Promise.resolve(void failures.push('retry')),
    });
    await expect.poll(() => failures.length).toBeGreaterThanOrEqual(2);
    await rm(stateDir);
    await rename(parked, stateDir);

    const result = await reporting;
    expect(result).toMatchObject({ delivered: true });
    expect(result.attempts).toBeGreaterThanOrEqual(3);
    const reports = emulator.requests().filter((r) => r.operation === 'executions.report');
    expect(reports.map((r) => r.status)).toEqual([200]);
    expect(emulator.executions()[0]!.reports).toEqual([
      expect.objectContaining({ status: 'COMPLETED', output: { ok: true } }),
    ]);
  });
});

describe('Reporter with a fence', () => {
  it('sends nothing, and stops retrying, once the fence says this process no longer owns the execution', async () => {
    const emulator = new Emulator({ apiKeys: [KEY] });
    const url = await emulator.listen();
    const client = new ServiceClient({ baseUrl: url, apiKey: KEY });
    cleanups.push(async () => {
      await client.close();
      await emulator.close();
    });
    const queued = emulator.enqueueExecution(emulator.createTask({ key: 't' }).id, {});
    await client.pollTask(queued.taskId);
    const reporter = new Reporter({
      client,
      clock: systemClock,
      logger: pino({ level: 'silent' }),
      backoff: { baseMs: 20, maxMs: 50 },
    });
    let asked = 0;
    const result = await reporter.report(queued.id, { status: 'COMPLETED', output: {} }, undefined, {
      mayReport: () => Promise.resolve(++asked < 1),
    });
    expect(result).toEqual({ delivered: false, attempts: 0, fenced: true });
    expect(asked).toBe(1);
    expect(emulator.execution(queued.id)!.reports).toHaveLength(0);
    expect(emulator.requests().filter((r) => r.operation === 'executions.report')).toHaveLength(0);

    const owned = await reporter.report(queued.id, { status: 'COMPLETED', output: {} }, undefined, {
      mayReport: () => Promise.resolve(true),
    });
    expect(owned).toEqual({ delivered: true, attempts: 1 });
    expect(emulator.execution(queued.id)!.reports).toHaveLength(1);
  });
});
