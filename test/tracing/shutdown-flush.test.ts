// Stop sends what is still queued: with batches due only every minute, an execution's spans reach the
// collector because SIGTERM flushes them, and the daemon still exits promptly.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Emulator } from '../../src/emulator/index.ts';
import { SHUTDOWN_FLUSH_MS } from '../../src/tracing/settings.ts';
import { runCli } from '../cli/process.ts';
import { waitFor } from '../daemon/harness.ts';
import { traceOf, tracingEnv, writeTracedHandler } from './fixtures.ts';
import { OtlpReceiver } from './otlp-receiver.ts';

const KEY = 'shutdown-flush-key-3a7d';
let emulator: Emulator;
let receiver: OtlpReceiver;
let dir: string;

beforeAll(async () => {
  emulator = new Emulator({ apiKeys: [KEY] });
  await emulator.listen();
  receiver = new OtlpReceiver();
  await receiver.listen();
  dir = await mkdtemp(join(tmpdir(), 'df-worker-shutdown-flush-'));
  emulator.createTask({ key: 'traced', retryCount: 1, inputKeys: [{ key: 'n', description: '' }] });
});

afterAll(async () => {
  await receiver.close();
  await emulator.close();
  await rm(dir, { recursive: true, force: true });
});

describe('stopping with spans queued', () => {
  it('flushes them on SIGTERM, within the bound', async () => {
    const handlers = await writeTracedHandler(dir, KEY);
    const execution = emulator.enqueueExecution('traced', { n: 7 });
    const cli = runCli(['start'], {
      DF_API_URL: emulator.url,
      DF_API_KEY: KEY,
      DF_HANDLERS_DIR: handlers,
      DF_STATE_DIR: join(dir, 'state'),
      DF_HTTP_PORT: '0',
      DF_RETRY_BASE_MS: '50',
      ...tracingEnv(receiver.url),
      // No batch is due during the run: only the stop's flush sends them.
      OTEL_BSP_SCHEDULE_DELAY: '60000',
    });
    try {
      await waitFor(() => emulator.executions()[0]?.reports.length === 1, 'the report', 30_000);
      // Reported, and its spans still queued in the daemon.
      expect(receiver.bodies).toEqual([]);
    } finally {
      cli.child.kill('SIGTERM');
    }
    const stopping = Date.now();
    expect((await cli.exited).code).toBe(0);
    expect(Date.now() - stopping).toBeLessThan(SHUTDOWN_FLUSH_MS + 3_000);
    expect(traceOf(receiver.spans, execution.id).map((s) => s.name)).toEqual(
      expect.arrayContaining([
        'df-worker.execution',
        'df-worker.poll',
        'df-worker.attempt',
        'df-worker.report',
        'handler.work',
      ]),
    );
  }, 60_000);
});
