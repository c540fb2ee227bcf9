// The emulator stamps an arrival when its event loop gets to it. A stalled test process must not turn a client
// that kept the limits into one that broke them (a batch stamped at once), and must not hide one that did.
import { Worker } from 'node:worker_threads';
import { afterEach, describe, expect, it } from 'vitest';
import { maxInWindow } from '../../src/budget/sliding-window.ts';
import { busiestWindow, Emulator, type RequestRecord } from '../../src/emulator/index.ts';
import { RateLimiter } from '../../src/emulator/limits.ts';

const KEY = 'arrival-watch-key';
const JAN_5 = Date.UTC(2026, 0, 5);

function record(at: number, earliestAt = at): RequestRecord {
  return {
    at,
    earliestAt,
    method: 'GET',
    path: '/p',
    operation: 'tasks.poll',
    status: 404,
    apiKeyValid: true,
    rateLimited: false,
  };
}

describe('busiestWindow', () => {
  it('is the busiest window of the stamps when the emulator was never blind', () => {
    const at = [0, 120, 130, 900, 1_000, 1_050, 1_400, 1_990, 2_000, 2_001];
    expect(
      busiestWindow(
        at.map((t) => record(t)),
        1_000,
      ),
    ).toBe(maxInWindow(at, 1_000));
    expect(busiestWindow([], 1_000)).toBe(0);
  });

  it('spreads a batch stamped at once over the blind spell before it, and no further', () => {
    // Six requests stamped within 3 ms after a 1.5 s spell: they may have come 3 at its start, 3 at 1 s.
    const batch = [0, 1, 1, 2, 2, 3].map((d) => record(1_500 + d, 0));
    expect(
      maxInWindow(
        batch.map((r) => r.at),
        1_000,
      ),
    ).toBe(6);
    expect(busiestWindow(batch, 1_000)).toBe(3);
    // After a 0.2 s spell no placement keeps them under 6 in a second.
    expect(
      busiestWindow(
        batch.map((r) => ({ ...r, earliestAt: 1_300 })),
        1_000,
      ),
    ).toBe(6);
  });
});

describe('RateLimiter with the earliest instant of an arrival', () => {
  it('counts a request at the first instant of its span that keeps the windows', () => {
    const limiter = new RateLimiter({ perSecond: 2, perMinute: 0, perMonth: 0 });
    expect(limiter.take('k', JAN_5 + 1_200, JAN_5).allowed).toBe(true);
    expect(limiter.take('k', JAN_5 + 1_200, JAN_5).allowed).toBe(true);
    // Counted at JAN_5 twice, the third and fourth fit at JAN_5 + 1000, within their span.
    expect(limiter.take('k', JAN_5 + 1_200, JAN_5).allowed).toBe(true);
    expect(limiter.take('k', JAN_5 + 1_200, JAN_5).allowed).toBe(true);
    // A fifth would need JAN_5 + 2000, after its handling: refused, with the wait counted from now.
    expect(limiter.take('k', JAN_5 + 1_201, JAN_5)).toEqual({ allowed: false, retryAfterSeconds: 1 });
  });

  it('refuses as before when the span is one instant', () => {
    const limiter = new RateLimiter({ perSecond: 1, perMinute: 0, perMonth: 0 });
    expect(limiter.take('k', JAN_5).allowed).toBe(true);
    expect(limiter.take('k', JAN_5 + 999, JAN_5 + 999)).toEqual({ allowed: false, retryAfterSeconds: 1 });
  });
});

/** Another thread (its own event loop) sends `count` polls, `gapMs` apart, each on its own connection. */
function sendFromWorker(pollUrl: string, count: number, gapMs: number): { go: () => Promise<number[]> } {
  const worker = new Worker(
    `const { workerData, parentPort } = require('node:worker_threads');
     const http = require('node:http');
     parentPort.once('message', () => {
       const statuses = [];
       for (let i = 0; i < workerData.count; i++) {
         setTimeout(() => {
           const req = http.request(workerData.pollUrl, {
             agent: false, headers: { 'x-api-key': workerData.key },
           }, (res) => {
             res.resume();
             statuses.push(res.statusCode);
             if (statuses.length === workerData.count) parentPort.postMessage(statuses);
           });
           req.on('error', () => statuses.push(0));
           req.end();
         }, i * workerData.gapMs);
       }
     });`,
    { eval: true, workerData: { pollUrl, count, gapMs, key: KEY } },
  );
  return {
    go: async () => {
      const done = new Promise<number[]>((resolve, reject) => {
        worker.once('message', resolve);
        worker.once('error', reject);
      });
      worker.postMessage('go');
      try {
        return await done;
      } finally {
        await worker.terminate();
      }
    },
  };
}

function blockFor(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // The test process stalls, as a starved or paused one does.
  }
}

describe('an emulator whose process stalls while requests come', () => {
  let emulator: Emulator | undefined;
  afterEach(async () => {
    await emulator?.close();
    emulator = undefined;
  });

  /** The URL of an empty task's poll (404 unless refused). */
  async function started(): Promise<string> {
    emulator = new Emulator({ apiKeys: [KEY], limits: { perSecond: 5, perMinute: 0, perMonth: 0 } });
    const task = emulator.createTask({ key: 't1' });
    return `${await emulator.listen()}/v1/data-factory/tasks/${task.id}/poll`;
  }

  it('neither refuses nor counts 6 in a second when 6 came 300 ms apart during a 2.5 s stall', async () => {
    const sender = sendFromWorker(await started(), 6, 300);
    const statuses = sender.go();
    blockFor(2_500);
    expect(await statuses).toHaveLength(6);
    const requests = emulator!.requests();
    // The stall did stamp them as one batch: the old count would have said 6 and refused the sixth.
    expect(
      maxInWindow(
        requests.map((r) => r.at),
        1_000,
      ),
    ).toBe(6);
    expect(requests.filter((r) => r.status === 429)).toEqual([]);
    expect(busiestWindow(requests, 1_000)).toBeLessThanOrEqual(5);
  }, 20_000);

  it('still refuses the sixth of 6 that came at once while it was free', async () => {
    const sender = sendFromWorker(await started(), 6, 0);
    const statuses = await sender.go();
    expect(statuses.filter((s) => s === 429)).toHaveLength(1);
    expect(busiestWindow(emulator!.requests(), 1_000)).toBe(6);
  }, 20_000);
});
