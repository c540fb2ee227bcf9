// A collector that is down costs the daemon nothing it needs: executions are claimed, run and reported, the
// probes answer, one warning says traces are lost, and SIGTERM still exits promptly (the last flush is bounded).
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Emulator } from '../../src/emulator/index.ts';
import { SHUTDOWN_FLUSH_MS } from '../../src/tracing/settings.ts';
import { runCli } from '../cli/process.ts';
import { freePort } from '../cluster/redis-server.ts';
import { waitFor } from '../daemon/harness.ts';
import { tracingEnv, writeTracedHandler } from './fixtures.ts';

const KEY = 'collector-down-key-0d1e';
const EXECUTIONS = 10;
let emulator: Emulator;
let dir: string;

beforeAll(async () => {
  emulator = new Emulator({ apiKeys: [KEY] });
  await emulator.listen();
  dir = await mkdtemp(join(tmpdir(), 'df-worker-collector-down-'));
  emulator.createTask({ key: 'traced', retryCount: 1, inputKeys: [{ key: 'n', description: '' }] });
});

afterAll(async () => {
  await emulator.close();
  await rm(dir, { recursive: true, force: true });
});

describe('a collector that is down', () => {
  it('neither blocks nor crashes the daemon: every execution reported, probes ready, a prompt exit', async () => {
    const handlers = await writeTracedHandler(dir, KEY);
    // Nothing listens there: every export is refused.
    const closed = `http://127.0.0.1:${await freePort()}`;
    const cli = runCli(['start'], {
      DF_API_URL: emulator.url,
      DF_API_KEY: KEY,
      DF_HANDLERS_DIR: handlers,
      DF_STATE_DIR: join(dir, 'state'),
      DF_HTTP_PORT: '0',
      DF_HTTP_HOST: '127.0.0.1',
      DF_RETRY_BASE_MS: '50',
      DF_CONCURRENCY: '4',
      ...tracingEnv(closed),
      // The SDK's default is 10 s; shorter here only so the warning comes sooner.
      OTEL_EXPORTER_OTLP_TRACES_TIMEOUT: '3000',
    });
    try {
      for (let n = 0; n < EXECUTIONS; n++) emulator.enqueueExecution('traced', { n });
      await waitFor(
        () => emulator.executions().every((e) => e.reports.length === 1),
        'every execution reported',
        40_000,
      );
      // Exports have failed meanwhile (one every 100 ms, OTEL_BSP_SCHEDULE_DELAY): said once, not per batch.
      await waitFor(
        () =>
          cli.logs().some((l) => typeof l.msg === 'string' && l.msg.startsWith('could not export traces')),
        'the warning',
        20_000,
      );
      const url = cli.logs().find((l) => l.msg === 'serving /metrics, /healthz and /readyz')?.url as string;
      const ready = await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(5_000) });
      expect(ready.status).toBe(200);
      expect(emulator.executions().every((e) => e.reports[0]?.status === 'COMPLETED')).toBe(true);
    } finally {
      cli.child.kill('SIGTERM');
    }
    const stopping = Date.now();
    expect((await cli.exited).code).toBe(0);
    const stopMs = Date.now() - stopping;
    console.log(`stopped in ${stopMs} ms with the collector down`);
    // Nothing runs any more: the stop is the drain (quick) plus at most the bounded flush.
    expect(stopMs).toBeLessThan(SHUTDOWN_FLUSH_MS + 3_000);
    const warnings = cli
      .logs()
      .filter((l) => typeof l.msg === 'string' && l.msg.startsWith('could not export'));
    expect(warnings).toHaveLength(1);
    expect(cli.logs().filter((l) => (l.level as number) >= 50)).toEqual([]);
  }, 90_000);
});
