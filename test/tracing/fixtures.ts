// What the tracing tests share: a handler that fails its first attempt, then calls ctx.service inside a span of
// its own, in a folder whose node_modules is this checkout's (so it imports @opentelemetry/api as a user's
// handler does); and the tree of one execution's trace, read from the receiver.
import { mkdir, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { expect } from 'vitest';
import { REPO_ROOT } from '../cli/process.ts';
import { drawTree, type ReceivedSpan } from './otlp-receiver.ts';

/** Writes the `traced` handler into `dir`/handlers; `secret` goes into its first attempt's error message. */
export async function writeTracedHandler(dir: string, secret: string, key = 'traced'): Promise<string> {
  const handlers = path.join(dir, 'handlers');
  await mkdir(handlers, { recursive: true });
  await symlink(path.join(REPO_ROOT, 'node_modules'), path.join(dir, 'node_modules')).catch(() => undefined);
  await writeFile(
    path.join(handlers, `${key}.ts`),
    `import { trace } from '@opentelemetry/api';
import { defineTask } from 'df-worker';
export default defineTask({
  key: '${key}',
  retryCount: 1,
  inputKeys: ['n'],
  outputKeys: ['seen'],
  handle: async (input: { n: number }, ctx) => {
    ctx.span.setAttribute('handler.n', input.n);
    if (ctx.attempt === 1) throw new TypeError('upstream refused the key ${secret}');
    ctx.logger.info('second attempt under way');
    const seen = await trace.getTracer('traced-handler').startActiveSpan('handler.work', async (span) => {
      try {
        const execution = await ctx.service.executions.get(ctx.execution.id);
        return execution.status;
      } finally {
        span.end();
      }
    });
    ctx.span.addEvent('handler.done', { seen });
    return { seen };
  },
});
`,
  );
  return handlers;
}

/** The environment that turns tracing on against `collector`, with spans sent every 100 ms. */
export function tracingEnv(collector: string): Record<string, string> {
  return {
    OTEL_EXPORTER_OTLP_ENDPOINT: collector,
    OTEL_BSP_SCHEDULE_DELAY: '100',
    OTEL_SERVICE_NAME: 'df-worker-test',
  };
}

/** Every span of the trace whose root is execution `executionId`'s `df-worker.execution` span. */
export function traceOf(spans: ReceivedSpan[], executionId: string): ReceivedSpan[] {
  const root = spans.find(
    (s) => s.name === 'df-worker.execution' && s.attributes['df_worker.execution.id'] === executionId,
  );
  if (!root) return [];
  return spans.filter((s) => s.traceId === root.traceId);
}

/**
 * Checks the tree of the `traced` handler's execution: root, the poll that claimed it, two attempts (the first
 * failed, its message redacted), the ctx.service call and the handler's own span under the second attempt, the
 * report. Returns the spans by name.
 */
export function expectExecutionTree(
  spans: ReceivedSpan[],
  o: { executionId: string; secret: string; serviceUrl: string; jobId: string },
): Record<'root' | 'poll' | 'first' | 'second' | 'call' | 'work' | 'report', ReceivedSpan> {
  const tree = drawTree(spans);
  const one = (name: string, where: (s: ReceivedSpan) => boolean = () => true): ReceivedSpan => {
    const found = spans.filter((s) => s.name === name && where(s));
    expect(found, `${name} in\n${tree}`).toHaveLength(1);
    return found[0]!;
  };
  const root = one('df-worker.execution');
  expect(root.parentSpanId, tree).toBeUndefined();
  expect(new Set(spans.map((s) => s.traceId)).size).toBe(1);
  expect(root.attributes).toMatchObject({
    'df_worker.task.key': 'traced',
    'df_worker.execution.id': o.executionId,
    'df_worker.job.id': o.jobId,
    'df_worker.execution.attempts': 2,
    'df_worker.execution.status': 'COMPLETED',
    'df_worker.report.result': 'delivered',
  });
  const poll = one('df-worker.poll');
  expect(poll.parentSpanId).toBe(root.spanId);
  expect(poll.attributes['df_worker.pickup_latency_ms']).toBeGreaterThanOrEqual(0);
  expect(poll.startMs).toBeGreaterThanOrEqual(root.startMs);

  const first = one('df-worker.attempt', (s) => s.attributes['df_worker.attempt'] === 1);
  const second = one('df-worker.attempt', (s) => s.attributes['df_worker.attempt'] === 2);
  for (const attempt of [first, second]) {
    expect(attempt.parentSpanId).toBe(root.spanId);
    expect(attempt.attributes['handler.n']).toBe(7);
  }
  expect(first.status.code).toBe(2);
  expect(first.attributes).toMatchObject({ 'error.type': 'TypeError', 'df_worker.attempt.result': 'threw' });
  expect(first.attributes['df_worker.error.message']).toBe('upstream refused the key [redacted]');
  expect(second.status.code).toBe(0);
  expect(second.events.map((e) => e.name)).toContain('handler.done');

  const call = one('df-worker.service executions.get');
  expect(call.parentSpanId).toBe(second.spanId);
  const url = new URL(o.serviceUrl);
  expect(call.attributes).toMatchObject({
    'http.request.method': 'GET',
    'server.address': url.hostname,
    'server.port': Number(url.port),
    'http.response.status_code': 200,
  });
  expect(call.attributes['url.full']).toMatch(new RegExp(`^${o.serviceUrl}/\\S*${o.executionId}$`));
  const work = one('handler.work');
  expect(work.parentSpanId).toBe(second.spanId);

  const report = one('df-worker.report');
  expect(report.parentSpanId).toBe(root.spanId);
  expect(report.attributes['df_worker.report.result']).toBe('delivered');
  expect(report.startMs).toBeGreaterThanOrEqual(second.endMs - 1);
  return { root, poll, first, second, call, work, report };
}

/** No attribute of any span, nor any byte the collector received, holds `secret`. */
export function expectNoSecret(bodies: string[], secret: string): void {
  expect(bodies.length).toBeGreaterThan(0);
  for (const body of bodies) expect(body).not.toContain(secret);
  for (const body of bodies) expect(body).not.toContain(encodeURIComponent(secret));
}
