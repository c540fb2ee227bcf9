// One trace per execution from `df-worker start` (standalone) to an OTLP/HTTP receiver on loopback: the tree
// of one execution, its ids and attributes, no API key anywhere, and log lines that carry the trace.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Emulator } from '../../src/emulator/index.ts';
import { runCli, type CliProcess } from '../cli/process.ts';
import { waitFor } from '../daemon/harness.ts';
import { expectExecutionTree, expectNoSecret, traceOf, tracingEnv, writeTracedHandler } from './fixtures.ts';
import { drawTree, OtlpReceiver } from './otlp-receiver.ts';

const KEY = 'trace-key-2f9c1e';
let emulator: Emulator;
let receiver: OtlpReceiver;
let dir: string;
let cli: CliProcess | undefined;

beforeAll(async () => {
  emulator = new Emulator({ apiKeys: [KEY] });
  await emulator.listen();
  receiver = new OtlpReceiver();
  await receiver.listen();
  dir = await mkdtemp(join(tmpdir(), 'df-worker-trace-'));
});

afterAll(async () => {
  if (cli && cli.child.exitCode === null) cli.child.kill('SIGKILL');
  await receiver.close();
  await emulator.close();
  await rm(dir, { recursive: true, force: true });
});

describe('traces of df-worker start', () => {
  it('exports one tree per execution: poll, two attempts, the ctx.service call, the report and its retry', async () => {
    const handlers = await writeTracedHandler(dir, KEY);
    emulator.createTask({ key: 'traced', retryCount: 1, inputKeys: [{ key: 'n', description: '' }] });
    const execution = emulator.enqueueExecution('traced', { n: 7 }, { jobId: 'job-31' });
    // The first report answers 503: the report span shows the retry.
    emulator.setFaults([{ operation: 'executions.report', kind: 'status', status: 503, count: 1 }]);
    cli = runCli(['start'], {
      DF_API_URL: emulator.url,
      DF_API_KEY: KEY,
      // The key then travels in every URL's query string: the spans' url.full must leave it out.
      DF_API_AUTH_MODE: 'query',
      DF_HANDLERS_DIR: handlers,
      DF_STATE_DIR: join(dir, 'state'),
      DF_HTTP_PORT: '0',
      DF_RETRY_BASE_MS: '50',
      ...tracingEnv(receiver.url),
    });
    await waitFor(
      () => traceOf(receiver.spans, execution.id).some((s) => s.name === 'df-worker.report'),
      'the execution trace',
      30_000,
    );
    cli.child.kill('SIGTERM');
    expect((await cli.exited).code).toBe(0);

    const spans = traceOf(receiver.spans, execution.id);
    const { root, report, second } = expectExecutionTree(spans, {
      executionId: execution.id,
      secret: KEY,
      serviceUrl: emulator.url,
      jobId: 'job-31',
    });
    expect(root.resource).toMatchObject({ 'service.name': 'df-worker-test' });
    expect(report.attributes['df_worker.report.attempts']).toBe(2);
    expect(report.events.map((e) => e.name)).toEqual(['report.retry']);
    expect(report.events[0]!.attributes).toMatchObject({
      'df_worker.report.attempt': 1,
      'error.type': 'ServiceError',
    });
    expectNoSecret(receiver.bodies, KEY);
    // The execution's log lines carry its trace.
    const claimed = cli.logs().find((l) => l.msg === 'execution claimed' && l.executionId === execution.id);
    expect(claimed).toMatchObject({ trace_id: root.traceId, span_id: root.spanId });
    // So do the lines the event log writes from the execution's later events.
    for (const msg of ['execution finished', 'execution reported']) {
      const line = cli.logs().find((l) => l.msg === msg && l.executionId === execution.id);
      expect(line, msg).toMatchObject({ trace_id: root.traceId });
    }
    const failed = cli.logs().find((l) => l.msg === 'attempt failed; retrying');
    expect(failed?.trace_id).toBe(root.traceId);
    // A line the handler logged in its worker process carries its attempt's span.
    const handlerLine = cli.logs().find((l) => l.msg === 'second attempt under way');
    expect(handlerLine).toMatchObject({ trace_id: root.traceId, span_id: second.spanId, attempt: 2 });
    console.log(`one execution's trace (standalone):\n${drawTree(spans)}`);
  }, 60_000);
});
