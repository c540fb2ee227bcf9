// What the budget lets through must reach the service when the budget counted it: a request that waits in
// the HTTP pool for a busy connection would leave later, in a burst with others the budget counted apart. And
// one that is held after the gate (a fence checked in Redis, a connection opened) is counted from when it left.
import { afterEach, describe, expect, it } from 'vitest';
import { ServiceClient } from '../../src/api/client.ts';
import { ServiceError } from '../../src/api/errors.ts';
import { Budget, maxInWindow } from '../../src/budget/index.ts';
import { systemClock } from '../../src/clock/clock.ts';
import { Emulator } from '../../src/emulator/index.ts';

const KEY = 'gate-to-wire-key';
const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

describe('requests the budget lets through', () => {
  it('reach the service within the per-second limit even while the service stalls on earlier ones', async () => {
    const emulator = new Emulator({
      apiKeys: [KEY],
      limits: { perSecond: 5, perMinute: 1_000, perMonth: 40_000 },
    });
    const url = await emulator.listen();
    closers.push(() => emulator.close());
    // The service is slow to answer the first 4 reports (a GC pause, a slow database): with a pool of 4
    // connections every later request queued behind them and left in one burst.
    emulator.setFaults([{ operation: 'executions.report', kind: 'latency', ms: 1_500, count: 4 }]);
    const budget = new Budget({
      limits: { perSecond: 5, perMinute: 1_000, perMonth: 40_000 },
      clock: systemClock,
      safetyMarginMs: 200,
    });
    const client = new ServiceClient({ baseUrl: url, apiKey: KEY, gate: budget });
    closers.push(() => client.close());

    // Ten reports at once, as when ten handlers finish together; the ids are unknown, so each is answered 404.
    const answers = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        client.reportExecution(`unknown-${i}`, { status: 'COMPLETED', output: {} }).then(
          () => 200,
          (error: unknown) => (error instanceof ServiceError ? error.status : 0),
        ),
      ),
    );

    expect(answers).toEqual(Array.from({ length: 10 }, () => 404));
    const arrivals = emulator.requests().map((r) => r.at);
    expect(arrivals).toHaveLength(10);
    expect(maxInWindow(arrivals, 1_000)).toBeLessThanOrEqual(5);
  }, 10_000);

  it('count a request held between the gate and the wire from when it left, not from when it was let through', async () => {
    const limits = { perSecond: 3, perMinute: 1_000, perMonth: 40_000 };
    const emulator = new Emulator({ apiKeys: [KEY], limits });
    const url = await emulator.listen();
    closers.push(() => emulator.close());
    const budget = new Budget({ limits, clock: systemClock, safetyMarginMs: 150 });
    const client = new ServiceClient({ baseUrl: url, apiKey: KEY, gate: budget });
    closers.push(() => client.close());
    const statusOf = (call: Promise<unknown>) =>
      call.then(
        () => 200,
        (error: unknown) => (error instanceof ServiceError ? error.status : 0),
      );

    // Three reports fill the second, each then held 600 ms before it leaves (as clustered mode's fence check in
    // a slow Redis holds it); a fourth request queues behind them. Counted when let through, it would go 1.15 s
    // after them and reach the service 550 ms after the reports: four in its second, a 429.
    const holdMs = 600;
    const held = () => new Promise<void>((resolve) => setTimeout(resolve, holdMs));
    const reports = Array.from({ length: 3 }, (_, i) =>
      statusOf(client.reportExecution(`unknown-${i}`, { status: 'COMPLETED', output: {} }, undefined, held)),
    );
    const fourth = statusOf(client.getExecution('unknown-3'));

    expect(await Promise.all([...reports, fourth])).toEqual([404, 404, 404, 404]);
    const arrivals = emulator.requests().map((r) => r.at);
    expect(arrivals).toHaveLength(4);
    expect(maxInWindow(arrivals, 1_000)).toBeLessThanOrEqual(3);
    const [lastReport, fourthAt] = [Math.max(...arrivals.slice(0, 3)), arrivals[3]!];
    expect(fourthAt - lastReport).toBeGreaterThanOrEqual(1_000);
  }, 10_000);
});
