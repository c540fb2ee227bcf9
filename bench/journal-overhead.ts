// What durability costs per execution: claim, outcome and removal records written with fsync and rename,
// as the daemon does for every execution. Prints the mean and p99 per execution and the rate on this disk.
//   npm run bench:journal [-- --executions 500]
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Journal } from '../src/journal/journal.ts';

const { values } = parseArgs({ options: { executions: { type: 'string', default: '500' } } });
const count = Number(values.executions);
const dir = await mkdtemp(join(tmpdir(), 'df-worker-journal-bench-'));
const journal = await Journal.open(dir, { logger: { warn: () => undefined } });
const input = {
  sku: 'TS-0042',
  title: 'Organic cotton T-shirt',
  price: '24.90',
  currency: 'EUR',
  context: { jobId: 'j1' },
};
const perExecutionMs: number[] = [];
const started = performance.now();
for (let i = 0; i < count; i++) {
  const t0 = performance.now();
  const executionId = `execution-${i}`;
  await journal.recordClaim({
    executionId,
    taskId: 't1',
    taskKey: 'enrich-product',
    input,
    claimedAt: new Date().toISOString(),
  });
  await journal.recordOutcome(executionId, {
    status: 'COMPLETED',
    output: { slug: 'organic-cotton-t-shirt-ts-0042', priceMinor: 2490 },
    attempts: 1,
    finishedAt: new Date().toISOString(),
  });
  await journal.complete(executionId);
  perExecutionMs.push(performance.now() - t0);
}
const totalMs = performance.now() - started;
perExecutionMs.sort((a, b) => a - b);
const mean = perExecutionMs.reduce((a, b) => a + b, 0) / count;
console.log(
  JSON.stringify(
    {
      executions: count,
      meanMsPerExecution: Math.round(mean * 100) / 100,
      p99MsPerExecution: Math.round(perExecutionMs[Math.floor(count * 0.99)]! * 100) / 100,
      executionsPerSecond: Math.round((count / totalMs) * 1000),
      folder: tmpdir(),
    },
    null,
    2,
  ),
);
await rm(dir, { recursive: true, force: true });
