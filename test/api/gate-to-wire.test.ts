// What the budget lets through must reach the service when the budget counted it: a request that waits in
// the HTTP pool for a busy connection would leave later, in a burst with others the budget counted apart.
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
});
