// The Reporter on the manual clock, against the emulator answering in process through the real budget: which
// failures it retries and after how long, which it gives up on, and what it does with a report whose answer
// was lost.
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { backoffDelayMs, type BackoffOptions } from '../../src/clock/backoff.ts';
import { ManualClock } from '../../src/clock/manual-clock.ts';
import { Emulator, type FaultRule } from '../../src/emulator/index.ts';
import { Reporter } from '../../src/reports/reporter.ts';
import { driveClockUntil, serviceOnClock, runOnClock, seededRandom } from '../clock/virtual-time.ts';

const KEY = 'reporter-unit-key';
const START = Date.UTC(2026, 10, 27, 12);

function rig(
  faults: FaultRule[],
  backoff: BackoffOptions = { baseMs: 100, maxMs: 1_000, random: () => 0.5 },
) {
  const clock = new ManualClock(START);
  const emulator = new Emulator({
    clock,
    apiKeys: [KEY],
    limits: { perSecond: 0, perMinute: 0, perMonth: 0 },
  });
  const { budget, client } = serviceOnClock(emulator, clock, {
    apiKey: KEY,
    limits: { perSecond: 20, perMinute: 600, perMonth: 100_000 },
  });
  const task = emulator.createTask({ key: 'report-me' });
  emulator.enqueueExecution(task.id, {});
  const failures: string[] = [];
  const reporter = new Reporter({
    client,
    clock,
    logger: pino({ level: 'silent' }),
    backoff,
    onAttemptFailed: (_id, error) => failures.push((error as Error).name),
  });
  /** Claims the pending execution (so that it is IN_PROGRESS), then sets the faults for what follows. */
  async function claim(): Promise<string> {
    const execution = await client.pollTask(task.id);
    emulator.setFaults(faults);
    return execution!.id;
  }
  const sent = (operation = 'executions.report') =>
    emulator
      .requests()
      .filter((r) => r.operation === operation)
      .map((r) => ({ at: r.at - START, status: r.status }));
  return { clock, emulator, reporter, budget, failures, claim, sent };
}

describe('Reporter', () => {
  it('retries 5xx answers after the back-off, and delivers the report once accepted', async () => {
    const r = rig([{ operation: 'executions.report', kind: 'status', status: 503, count: 2 }]);
    const id = await r.claim();
    let retries = 0;
    const result = await runOnClock(
      r.clock,
      r.reporter.report(id, { status: 'COMPLETED', output: { n: 1 } }, undefined, {
        onRetry: () => Promise.resolve(void retries++),
      }),
    );
    expect(result).toEqual({ delivered: true, attempts: 3 });
    // Full jitter at 0.5: half of 100 ms, then half of 200 ms.
    expect(r.sent()).toEqual([
      { at: 0, status: 503 },
      { at: 50, status: 503 },
      { at: 150, status: 200 },
    ]);
    expect(retries).toBe(2);
    expect(r.failures).toEqual(['ServiceError', 'ServiceError']);
    expect(r.emulator.execution(id)).toMatchObject({ status: 'COMPLETED', reports: [{ output: { n: 1 } }] });
  });

  it('sends nothing before the back-off has passed', async () => {
    const r = rig([{ operation: 'executions.report', kind: 'status', status: 500, count: 1 }]);
    const id = await r.claim();
    const reporting = r.reporter.report(id, { status: 'FAILED', output: { error: 'x' } });
    await r.clock.advance(49);
    expect(r.sent()).toHaveLength(1);
    await r.clock.advance(1);
    expect(await reporting).toEqual({ delivered: true, attempts: 2 });
    expect(r.sent()).toEqual([
      { at: 0, status: 500 },
      { at: 50, status: 200 },
    ]);
  });

  it('grows the back-off exponentially up to its cap and never gives up on transient failures', async () => {
    const backoff = { baseMs: 100, maxMs: 800, random: seededRandom(7) };
    const expected = { ...backoff, random: seededRandom(7) };
    const r = rig([{ operation: 'executions.report', kind: 'status', status: 502, count: 12 }], backoff);
    const id = await r.claim();
    const result = await runOnClock(r.clock, r.reporter.report(id, { status: 'COMPLETED', output: {} }));
    expect(result).toEqual({ delivered: true, attempts: 13 });
    const at = r.sent().map((s) => s.at);
    const gaps = at.slice(1).map((t, i) => t - at[i]!);
    expect(gaps).toEqual(Array.from({ length: 12 }, (_, i) => backoffDelayMs(i + 1, expected)));
    for (const [i, gap] of gaps.entries()) expect(gap).toBeLessThanOrEqual(Math.min(800, 100 * 2 ** i));
  });

  it('retries a dropped connection (network error) after the back-off', async () => {
    const r = rig([{ operation: 'executions.report', kind: 'drop', count: 2 }]);
    const id = await r.claim();
    const result = await runOnClock(r.clock, r.reporter.report(id, { status: 'COMPLETED', output: {} }));
    expect(result).toEqual({ delivered: true, attempts: 3 });
    expect(r.failures).toEqual(['NetworkError', 'NetworkError']);
    expect(r.sent()).toEqual([
      { at: 0, status: 0 },
      { at: 50, status: 0 },
      { at: 150, status: 200 },
    ]);
  });

  it("waits out a 429's Retry-After in the budget, not its own back-off, then delivers", async () => {
    const r = rig([{ operation: 'executions.report', kind: 'rateLimit', retryAfterSeconds: 5, count: 1 }]);
    const id = await r.claim();
    const result = await runOnClock(r.clock, r.reporter.report(id, { status: 'COMPLETED', output: {} }));
    expect(result).toEqual({ delivered: true, attempts: 2 });
    expect(r.sent()).toEqual([
      { at: 0, status: 429 },
      { at: 5_000, status: 200 },
    ]);
    expect(r.budget.pausedUntil).toBe(START + 5_000);
  });

  it('retries a 401 with the back-off (the key may be restored)', async () => {
    const r = rig([{ operation: 'executions.report', kind: 'status', status: 401, count: 2 }]);
    const id = await r.claim();
    const result = await runOnClock(r.clock, r.reporter.report(id, { status: 'COMPLETED', output: {} }));
    expect(result).toEqual({ delivered: true, attempts: 3 });
    expect(r.sent().map((s) => s.at)).toEqual([0, 50, 150]);
  });

  it('gives a report up at once when the service refuses it for good (404), after checking it was not applied', async () => {
    const r = rig([]);
    const result = await runOnClock(
      r.clock,
      r.reporter.report('no-such-execution', { status: 'COMPLETED', output: {} }),
    );
    expect(result).toMatchObject({
      delivered: false,
      attempts: 1,
      refused: { status: 404, code: 'NOT_FOUND' },
    });
    expect(r.sent()).toEqual([{ at: 0, status: 404 }]);
    expect(r.sent('executions.get')).toEqual([{ at: 0, status: 404 }]);
    expect(r.clock.now()).toBe(START);
  });

  it('sends again a report whose answer was lost (applied, then the connection dropped)', async () => {
    const r = rig([{ operation: 'executions.report', kind: 'dropAfterApply', count: 1 }]);
    const id = await r.claim();
    const result = await runOnClock(
      r.clock,
      r.reporter.report(id, { status: 'COMPLETED', output: { v: 2 } }),
    );
    expect(result).toEqual({ delivered: true, attempts: 2 });
    // At least once: the service saw it twice, with the same outcome.
    expect(r.emulator.execution(id)?.reports.map((x) => x.status)).toEqual(['COMPLETED', 'COMPLETED']);
  });

  it('counts as delivered a retry refused because the lost first attempt was applied', async () => {
    const r = rig([
      { operation: 'executions.report', kind: 'dropAfterApply', count: 1 },
      { operation: 'executions.report', kind: 'status', status: 409, count: 1 },
    ]);
    const id = await r.claim();
    const result = await runOnClock(
      r.clock,
      r.reporter.report(id, { status: 'FAILED', output: { error: 'e' } }),
    );
    expect(result).toEqual({ delivered: true, attempts: 2 });
    expect(r.sent('executions.get')).toEqual([{ at: 50, status: 200 }]);
    expect(r.emulator.execution(id)?.status).toBe('FAILED');
  });

  it('reads a refused report back again after a 429, and counts it delivered when it was applied', async () => {
    const r = rig([
      { operation: 'executions.report', kind: 'dropAfterApply', count: 1 },
      { operation: 'executions.report', kind: 'status', status: 409, count: 1 },
      { operation: 'executions.get', kind: 'status', status: 429, count: 1 },
    ]);
    const id = await r.claim();
    const result = await runOnClock(
      r.clock,
      r.reporter.report(id, { status: 'FAILED', output: { error: 'e' } }),
    );
    expect(result).toEqual({ delivered: true, attempts: 2 });
    expect(r.sent('executions.get').map((x) => x.status)).toEqual([429, 200]);
  });

  it('dead-letters a refusal when the execution does not carry the reported status', async () => {
    const r = rig([{ operation: 'executions.report', kind: 'status', status: 400, count: 1 }]);
    const id = await r.claim();
    const result = await runOnClock(r.clock, r.reporter.report(id, { status: 'COMPLETED', output: {} }));
    expect(result).toMatchObject({ delivered: false, attempts: 1, refused: { status: 400 } });
    expect(r.emulator.execution(id)?.status).toBe('IN_PROGRESS');
  });

  it('takes a 2xx whose body is not the documented shape as delivered, without sending it again', async () => {
    const r = rig([
      { operation: 'executions.report', kind: 'status', status: 200, body: '<html>ok</html>', count: 1 },
    ]);
    const id = await r.claim();
    const result = await runOnClock(r.clock, r.reporter.report(id, { status: 'COMPLETED', output: {} }));
    expect(result).toEqual({ delivered: true, attempts: 1 });
    expect(r.sent()).toHaveLength(1);
  });

  it('stops retrying when its signal aborts during the back-off, and says so', async () => {
    const r = rig([{ operation: 'executions.report', kind: 'status', status: 503 }]);
    const id = await r.claim();
    const stop = new AbortController();
    const reporting = r.reporter.report(id, { status: 'COMPLETED', output: {} }, stop.signal);
    await driveClockUntil(r.clock, () => r.sent().length === 4);
    await r.clock.advance(10);
    stop.abort(new Error('exit deadline'));
    expect(await reporting).toEqual({ delivered: false, attempts: 4, interrupted: true });
    await r.clock.advance(60_000);
    expect(r.sent()).toHaveLength(4);
    expect(r.clock.pending).toBe(0);
  });

  it('refuses at once, sending nothing, a report it cannot send (ReportValidationError)', async () => {
    const r = rig([]);
    const id = await r.claim();
    const result = await r.reporter.report(id, { status: 'COMPLETED', output: [] as never });
    expect(result).toMatchObject({ delivered: false, attempts: 1, refused: { status: 0 } });
    expect(r.sent()).toEqual([]);
  });

  // A Retry-After given as an HTTP date is measured on the clock the budget runs on (the client's `clock`), not
  // the wall clock: here the date lies 5 s ahead on the budget's clock but in the wall clock's past.
  it('waits out a Retry-After given as an HTTP date on the clock the budget runs on', async () => {
    const r = rig([
      {
        operation: 'executions.report',
        kind: 'status',
        status: 429,
        headers: { 'retry-after': new Date(START + 5_000).toUTCString() },
        count: 1,
      },
    ]);
    const id = await r.claim();
    const result = await runOnClock(r.clock, r.reporter.report(id, { status: 'COMPLETED', output: {} }));
    expect(result).toEqual({ delivered: true, attempts: 2 });
    expect(r.sent()).toEqual([
      { at: 0, status: 429 },
      { at: 5_000, status: 200 },
    ]);
  });
});
