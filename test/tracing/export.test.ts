// What leaves the daemon: spans a handler worker forwards, checked and rebuilt as the daemon's own; every span
// scrubbed of the daemon's secrets; a collector that refuses told once in the log, and once when it is back.
import { Writable } from 'node:stream';
import { context, trace, type Span } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
  type ReadableSpan,
  type SpanExporter,
} from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { redactor } from '../../src/secrets/redact.ts';
import { createLogger } from '../../src/telemetry/logger.ts';
import { forwardedSpan, readableSpans, spanUpdate } from '../../src/tracing/forwarded-span.ts';
import { GuardedExporter } from '../../src/tracing/guarded-exporter.ts';
import { OtlpReceiver } from './otlp-receiver.ts';

const SECRET = 'export-test-secret-91f3';

/** Spans made by a real SDK provider, ended, as its exporter gets them. */
function endedSpans(make: (provider: BasicTracerProvider) => void): ReadableSpan[] {
  const memory = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(memory)] });
  make(provider);
  return memory.getFinishedSpans();
}

function exportOnce(exporter: SpanExporter, spans: ReadableSpan[]): Promise<number> {
  return new Promise((resolve) => exporter.export(spans, (result) => resolve(result.code)));
}

describe('spans forwarded from a handler worker', () => {
  it('cross as plain data and come back as spans of the daemon, parent and times kept', () => {
    const [child, parent] = endedSpans((provider) => {
      const tracer = provider.getTracer('handler-lib', '1.2.3');
      const outer = tracer.startSpan('outer');
      const inner = tracer.startSpan('inner', { attributes: { n: 1, tags: ['a', 'b'] } }, under(outer));
      inner.addEvent('step', { ok: true });
      inner.setStatus({ code: 2, message: 'bad' });
      inner.end();
      outer.end();
    });
    const crossed = JSON.parse(JSON.stringify([forwardedSpan(child!), forwardedSpan(parent!)])) as unknown[];
    const resource = resourceFromAttributes({ 'service.name': 'df-worker' });
    const [rebuilt, rebuiltParent] = readableSpans(crossed, resource);
    expect(rebuilt!.spanContext()).toMatchObject({
      traceId: child!.spanContext().traceId,
      spanId: child!.spanContext().spanId,
    });
    expect(rebuilt!.parentSpanContext?.spanId).toBe(parent!.spanContext().spanId);
    expect(rebuiltParent!.parentSpanContext).toBeUndefined();
    expect(rebuilt).toMatchObject({
      name: 'inner',
      startTime: child!.startTime,
      endTime: child!.endTime,
      attributes: { n: 1, tags: ['a', 'b'] },
      status: { code: 2, message: 'bad' },
      instrumentationScope: { name: 'handler-lib', version: '1.2.3' },
      resource,
      ended: true,
    });
    expect(rebuilt!.events).toMatchObject([{ name: 'step', attributes: { ok: true } }]);
  });

  it('drops what is not a span, and values that are not attributes', () => {
    const good = {
      name: 'ok',
      kind: 0,
      traceId: 'a'.repeat(32),
      spanId: 'b'.repeat(16),
      traceFlags: 1,
      startTime: [1, 0],
      endTime: [2, 0],
      attributes: { fine: 'yes', nested: { no: 1 }, fn: 'x' },
      events: [{ name: 'e', time: [1, 5] }, { name: 'no time' }],
      status: { code: 0 },
      scope: { name: 'h' },
    };
    const bad = [
      null,
      'span',
      { ...good, traceId: 'not hex' },
      { ...good, spanId: 'b'.repeat(15) },
      { ...good, parentSpanId: 42 },
      { ...good, startTime: [1, 2e9] },
    ];
    const spans = readableSpans([...bad, good], resourceFromAttributes({}));
    expect(spans.map((s) => s.name)).toEqual(['ok']);
    expect(spans[0]!.attributes).toEqual({ fine: 'yes', fn: 'x' });
    expect(spans[0]!.events.map((e) => e.name)).toEqual(['e']);
    expect(
      readableSpans(
        Array.from({ length: 600 }, () => good),
        resourceFromAttributes({}),
      ),
    ).toHaveLength(512);
    expect(spanUpdate({ op: 'end' })).toBeUndefined();
    expect(spanUpdate({ op: 'setStatus', code: 7 })).toEqual({ op: 'setStatus', code: 0 });
  });
});

describe('the guarded exporter', () => {
  let receiver: OtlpReceiver;
  beforeAll(async () => {
    receiver = new OtlpReceiver();
    await receiver.listen();
  });
  afterAll(async () => {
    await receiver.close();
  });

  it("removes the daemon's secrets from every span, and tells a refusing collector once, then its return", async () => {
    const lines: Record<string, unknown>[] = [];
    const logger = createLogger({
      level: 'info',
      destination: new Writable({
        write(chunk: Buffer, _encoding, done) {
          lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
          done();
        },
      }),
    });
    const exporter = new GuardedExporter(
      new OTLPTraceExporter({ url: `${receiver.url}/v1/traces`, timeoutMillis: 500 }),
      redactor([SECRET]),
      logger,
    );
    const make = () =>
      endedSpans((provider) => {
        const span = provider
          .getTracer('t')
          .startSpan(`call ${SECRET}`, { attributes: { url: `x?k=${SECRET}` } });
        span.addEvent('e', { said: [SECRET, 'ok'] });
        span.setStatus({ code: 2, message: `refused ${SECRET}` });
        span.end();
      });

    receiver.status = 503;
    expect(await exportOnce(exporter, make())).toBe(1);
    expect(await exportOnce(exporter, make())).toBe(1);
    receiver.status = 200;
    expect(await exportOnce(exporter, make())).toBe(0);

    const said = lines.map((l) => l.msg);
    expect(said.filter((m) => String(m).startsWith('could not export traces'))).toHaveLength(1);
    expect(lines.find((l) => l.msg === 'traces reach the collector again')).toMatchObject({ spansLost: 2 });
    expect(receiver.bodies).toHaveLength(1);
    expect(receiver.bodies[0]).not.toContain(SECRET);
    expect(receiver.bodies[0]).toContain('[redacted]');
    expect(receiver.spans[0]).toMatchObject({
      name: 'call [redacted]',
      attributes: { url: 'x?k=[redacted]' },
      status: { message: 'refused [redacted]' },
    });
    await exporter.shutdown();
  });
});

function under(parent: Span) {
  return trace.setSpan(context.active(), parent);
}
