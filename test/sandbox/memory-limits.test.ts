// Handler memory in the pool: a worker process that grows past DF_HANDLER_MEMORY_MB off the V8 heap (Buffers)
// is killed and only its attempt fails; worker processes carry the highest OOM score, so the kernel picks them
// over the daemon; an output over DF_HANDLER_MAX_OUTPUT_BYTES fails its execution before it reaches the daemon,
// whatever runs the handler.
import { readFile } from 'node:fs/promises';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/clock/clock.ts';
import { defineTask } from '../../src/handlers/define-task.ts';
import { inlineHost, withOutputLimit } from '../../src/runner/attempt-host.ts';
import { runExecution } from '../../src/runner/run-execution.ts';
import { HANDLER_OOM_SCORE_ADJ } from '../../src/sandbox/process-memory.ts';
import { execution } from '../runner/helpers.ts';
import { poolRig, type PoolRig } from './fixtures.ts';

/** `input.mode` picks: hold Buffers of `input.mb` MB (filled, so resident) one after another, or return big output. */
const MEMORY_HANDLER = `
import { defineTask } from 'df-worker';

const held: Buffer[] = [];

export default defineTask({
  key: 'misbehaving',
  outputKeys: ['result'],
  handle: async (input: Record<string, unknown>) => {
    switch (String(input.mode)) {
      case 'buffers':
        for (let i = 0; i < Number(input.count); i++) {
          held.push(Buffer.alloc(Number(input.mb) * 1024 * 1024, i + 1));
          // Yields between Buffers, as real code between chunks it reads would.
          await new Promise((resolve) => setTimeout(resolve, 10));
        }
        return { result: held.length };
      case 'output':
        return { result: 'x'.repeat(Number(input.bytes)) };
      default:
        return { result: 'ok' };
    }
  },
});
`;

let rig: PoolRig | undefined;
afterEach(async () => {
  await rig?.close();
  rig = undefined;
});

describe('HandlerPool (process) and memory off the V8 heap', () => {
  it('kills a worker process whose Buffers pass DF_HANDLER_MEMORY_MB: that attempt fails naming the limit, the next runs on a new worker', async () => {
    rig = await poolRig('process', { memoryMb: 64, source: MEMORY_HANDLER });
    // 20 Buffers of 16 MB: 320 MB if nothing stopped it.
    const outcome = await rig.run({ mode: 'buffers', mb: 16, count: 20 });
    expect(outcome.status).toBe('FAILED');
    expect(outcome.failure?.kind).toBe('crashed');
    expect(outcome.output.error).toMatch(
      /ran out of memory: its worker process held \d+ MB more than when it started \(heap and off-heap: Buffers, native memory\), over the 64 MB limit \(DF_HANDLER_MEMORY_MB\)/,
    );
    expect(rig.gone).toEqual(['out-of-memory']);
    expect((await rig.run({ mode: 'ok' })).output).toEqual({ result: 'ok' });
    expect(rig.started()).toBe(2);
  }, 20_000);

  it('leaves a worker whose Buffers stay under the limit alone', async () => {
    rig = await poolRig('process', { memoryMb: 64, source: MEMORY_HANDLER });
    // 2 × 8 MB, held by the module across attempts: 16 then 32 MB over the worker's start.
    expect((await rig.run({ mode: 'buffers', mb: 8, count: 2 })).output).toEqual({ result: 2 });
    expect((await rig.run({ mode: 'buffers', mb: 8, count: 2 })).output).toEqual({ result: 4 });
    expect(rig.gone).toEqual([]);
    expect(rig.started()).toBe(1);
  }, 20_000);

  it("gives each worker process the highest OOM score, so the kernel's OOM killer picks it before the daemon", async () => {
    rig = await poolRig('process', { source: MEMORY_HANDLER });
    await rig.run({ mode: 'ok' });
    const [pid] = rig.pool.workerPids();
    expect(pid).not.toBe(process.pid);
    expect(Number(await readFile(`/proc/${pid}/oom_score_adj`, 'utf8'))).toBe(HANDLER_OOM_SCORE_ADJ);
    expect(HANDLER_OOM_SCORE_ADJ).toBe(1000);
    expect(Number(await readFile('/proc/self/oom_score_adj', 'utf8'))).toBeLessThan(HANDLER_OOM_SCORE_ADJ);
  });
});

describe.each(['process', 'thread'] as const)(
  'HandlerPool (%s) and DF_HANDLER_MAX_OUTPUT_BYTES',
  (isolation) => {
    it('fails an execution whose output passes the limit, naming it, without retrying; one within it completes', async () => {
      rig = await poolRig(isolation, { maxOutputBytes: 100_000, source: MEMORY_HANDLER });
      const tooLarge = await rig.run({ mode: 'output', bytes: 5_000_000 }, { retryCount: 2 });
      expect(tooLarge).toMatchObject({ status: 'FAILED', attempts: 1, failure: { kind: 'output' } });
      expect(tooLarge.output.error).toMatch(
        /handler output is at least 5000\d+ bytes as JSON, over the 100000-byte output limit \(DF_HANDLER_MAX_OUTPUT_BYTES\)/,
      );
      // The whole JSON counts: 99,987 characters and the {"result":""} around them are 100,000 bytes.
      expect((await rig.run({ mode: 'output', bytes: 99_987 })).status).toBe('COMPLETED');
      expect((await rig.run({ mode: 'output', bytes: 99_988 })).failure?.kind).toBe('output');
      expect(rig.gone).toEqual([]);
    }, 20_000);
  },
);

describe('DF_HANDLER_MAX_OUTPUT_BYTES without isolation (inline host)', () => {
  it('fails an execution whose output passes the limit, escapes counted', async () => {
    const handler = defineTask({
      key: 'inline',
      outputKeys: ['result'],
      handle: (input: { text: string }) => ({ result: input.text }),
    });
    const run = (text: string) =>
      runExecution({
        handler,
        task: { key: 'inline', retryCount: 0, inputKeys: [], outputKeys: handler.outputKeys },
        execution: execution({ text }),
        clock: systemClock,
        logger: pino({ level: 'silent' }),
        defaultTimeoutMs: 5_000,
        host: withOutputLimit(inlineHost, 1_024),
      });
    // Each newline is 2 bytes as JSON: 500 of them and {"result":""} are 1,013 bytes, 510 are 1,033.
    expect((await run('\n'.repeat(500))).status).toBe('COMPLETED');
    const over = await run('\n'.repeat(510));
    expect(over.failure?.kind).toBe('output');
    expect(over.output.error).toMatch(/at least 1033 bytes as JSON, over the 1024-byte output limit/);
  });
});
