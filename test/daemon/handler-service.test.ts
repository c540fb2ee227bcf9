// ctx.service inside the daemon: handler calls share the key's budget with polls and reports (the emulator
// enforcing the service's per-second limit), and a 429 met by a handler call pauses every request.
import { afterEach, describe, expect, it } from 'vitest';
import { ServiceError } from '../../src/api/errors.ts';
import { busiestWindow, startHarness, TEST_KEY, waitFor, type Harness } from './harness.ts';

let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

describe('ctx.service in the daemon', () => {
  it('uploads a result file per execution under a 5/s limit with zero 429s, interleaved with polls and reports', async () => {
    harness = await startHarness({
      // Per-minute raised (as in the throughput test) so the run is bound by the per-second window alone.
      emulator: { limits: { perSecond: 5, perMinute: 1_000, perMonth: 40_000 } },
      settings: {
        'budget.perSecond': 5,
        'budget.perMinute': 1_000,
        concurrency: 4,
      },
      handlers: [
        {
          key: 'export-rows',
          inputKeys: ['rows'],
          outputKeys: ['fileId'],
          handle: async (input, ctx) => {
            const csv = (input.rows as string[]).join('\n');
            const file = await ctx.service.files.upload({ name: `${ctx.execution.id}.csv`, data: csv });
            return { fileId: file.id };
          },
        },
      ],
    });
    const { emulator, worker } = harness;
    const count = 15;
    for (let i = 0; i < count; i++) emulator.enqueueExecution('export-rows', { rows: [`a,${i}`, `b,${i}`] });
    worker.wake();
    await waitFor(() => emulator.executions().every((e) => e.reports.length > 0), 'every report', 60_000);

    const fileIds = emulator.executions().map((e) => e.reports[0]?.output.fileId);
    expect(new Set(fileIds).size).toBe(count);
    expect(emulator.executions().every((e) => e.reports[0]?.status === 'COMPLETED')).toBe(true);
    const requests = emulator.requests();
    const uploads = requests.filter((r) => r.operation === 'files.upload');
    const rateLimited = requests.filter((r) => r.status === 429).length;
    const busiestSecond = busiestWindow(requests, 1_000);
    const uploadSpanS = (uploads.at(-1)!.at - uploads[0]!.at) / 1000;
    const firstReport = requests.find((r) => r.operation === 'executions.report')!.at;
    expect(uploads).toHaveLength(count);
    expect(rateLimited).toBe(0);
    expect(busiestSecond).toBeLessThanOrEqual(5);
    // Interleaved: reports go out while uploads are still being made, not all after them.
    expect(firstReport).toBeLessThan(uploads.at(-1)!.at);
    expect(worker.budget!.monthUsed).toBeGreaterThanOrEqual(requests.length);
    console.log(
      `ctx.service uploads under 5/s: ${uploads.length} uploads in ${uploadSpanS.toFixed(1)} s ` +
        `(${(uploads.length / uploadSpanS).toFixed(2)} uploads/s), ${requests.length} requests in all ` +
        `(${requests.filter((r) => r.operation === 'tasks.poll').length} polls, ` +
        `${requests.filter((r) => r.operation === 'executions.report').length} reports), busiest second ` +
        `${busiestSecond}, 429s ${rateLimited}; per second: ${perSecond(requests)}`,
    );
  }, 90_000);

  it('pauses every request after a 429 met by a handler call; the handler retries after the pause', async () => {
    let refused: unknown;
    harness = await startHarness({
      handlers: [
        {
          key: 'upload-once',
          outputKeys: ['fileId'],
          handle: async (_input, ctx) => {
            const file = { name: 'out.txt', data: 'hello' };
            try {
              return { fileId: (await ctx.service.files.upload(file)).id };
            } catch (error) {
              refused = error;
              return { fileId: (await ctx.service.files.upload(file)).id };
            }
          },
        },
      ],
    });
    const { emulator, worker } = harness;
    emulator.setFaults([{ operation: 'files.upload', kind: 'rateLimit', retryAfterSeconds: 1, count: 1 }]);
    emulator.enqueueExecution('upload-once');
    worker.wake();
    await waitFor(() => emulator.executions().every((e) => e.reports.length > 0), 'the report', 10_000);

    expect(refused).toBeInstanceOf(ServiceError);
    expect((refused as ServiceError).status).toBe(429);
    const requests = emulator.requests();
    const limited = requests.find((r) => r.status === 429)!;
    const next = requests.find((r) => r.at > limited.at)!;
    // The budget paused every class for Retry-After: nothing at all went out for that second.
    expect(next.at - limited.at).toBeGreaterThanOrEqual(950);
    expect(requests.filter((r) => r.operation === 'files.upload').map((r) => r.status)).toEqual([429, 201]);
    expect(harness.logs.some((l) => l.msg === 'the service answered 429 RATE_LIMIT')).toBe(true);
    expect(JSON.stringify(refused)).not.toContain(TEST_KEY);
    expect(String((refused as Error).message)).not.toContain(TEST_KEY);
  });
});

/** Requests counted per wall-clock second from the first, e.g. `5 5 4 5`. */
function perSecond(requests: { at: number }[]): string {
  const start = requests[0]!.at;
  const counts: number[] = [];
  for (const r of requests) {
    const second = Math.floor((r.at - start) / 1000);
    counts[second] = (counts[second] ?? 0) + 1;
  }
  return Array.from(counts, (n) => n ?? 0).join(' ');
}
