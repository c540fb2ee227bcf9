// A handler's own spans nest under its attempt whatever runs it: a worker process, a worker thread, or the
// daemon's own loop. ctx.span's attributes and events land on the daemon's attempt span.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Emulator } from '../../src/emulator/index.ts';
import { runCli } from '../cli/process.ts';
import { waitFor } from '../daemon/harness.ts';
import { traceOf, tracingEnv, writeTracedHandler } from './fixtures.ts';
import { drawTree, OtlpReceiver } from './otlp-receiver.ts';

const KEY = 'handler-spans-key-77ab';
let emulator: Emulator;
let receiver: OtlpReceiver;
let dir: string;

beforeAll(async () => {
  // Three daemons one after the other on one key, each with a fresh budget: the service's own minute (50) would
  // answer 429 to a handler's ctx.service call of the last ones.
  emulator = new Emulator({
    apiKeys: [KEY],
    limits: { perSecond: 50, perMinute: 3_000, perMonth: 1_000_000 },
  });
  await emulator.listen();
  receiver = new OtlpReceiver();
  await receiver.listen();
  dir = await mkdtemp(join(tmpdir(), 'df-worker-handler-spans-'));
  emulator.createTask({ key: 'traced', retryCount: 1, inputKeys: [{ key: 'n', description: '' }] });
});

afterAll(async () => {
  await receiver.close();
  await emulator.close();
  await rm(dir, { recursive: true, force: true });
});

describe("a handler's own spans", () => {
  it.each(['process', 'thread', 'none'] as const)(
    'nest under its attempt with DF_HANDLER_ISOLATION=%s',
    async (isolation) => {
      const handlers = await writeTracedHandler(join(dir, isolation), KEY);
      const execution = emulator.enqueueExecution('traced', { n: 7 });
      const cli = runCli(['start'], {
        DF_API_URL: emulator.url,
        DF_API_KEY: KEY,
        DF_HANDLERS_DIR: handlers,
        DF_HANDLER_ISOLATION: isolation,
        DF_STATE_DIR: join(dir, isolation, 'state'),
        DF_HTTP_PORT: '0',
        DF_RETRY_BASE_MS: '50',
        ...tracingEnv(receiver.url),
      });
      try {
        await waitFor(
          () => traceOf(receiver.spans, execution.id).some((s) => s.name === 'df-worker.report'),
          'the execution trace',
          30_000,
        );
      } finally {
        cli.child.kill('SIGTERM');
      }
      expect((await cli.exited).code).toBe(0);
      const spans = traceOf(receiver.spans, execution.id);
      const tree = drawTree(spans);
      const second = spans.find(
        (s) => s.name === 'df-worker.attempt' && s.attributes['df_worker.attempt'] === 2,
      );
      const work = spans.find((s) => s.name === 'handler.work');
      expect(second, tree).toBeDefined();
      expect(work, tree).toBeDefined();
      expect(work!.traceId).toBe(second!.traceId);
      expect(work!.parentSpanId, tree).toBe(second!.spanId);
      // Exported by the daemon, whatever made it: one resource for the execution's spans.
      expect(work!.resource['service.name']).toBe('df-worker-test');
      expect(work!.startMs).toBeGreaterThanOrEqual(second!.startMs - 1);
      expect(work!.endMs).toBeLessThanOrEqual(second!.endMs + 1);
      // ctx.span is the attempt's span (or stands in for it): what the handler recorded is on it.
      expect(second!.attributes['handler.n']).toBe(7);
      expect(
        second!.events.find((e) => e.name === 'handler.done')?.attributes,
        `events of attempt 2: ${JSON.stringify(second!.events)}\n${tree}\n${cli.stdout().slice(-4000)}`,
      ).toEqual({ seen: 'IN_PROGRESS' });
    },
    60_000,
  );
});
