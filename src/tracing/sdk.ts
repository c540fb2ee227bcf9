// Tracing on: the OpenTelemetry SDK set up from its own environment variables (OTEL_EXPORTER_OTLP_ENDPOINT,
// OTEL_SERVICE_NAME, OTEL_TRACES_SAMPLER, OTEL_RESOURCE_ATTRIBUTES, OTEL_BSP_*...), an OTLP/HTTP exporter,
// and the listener that turns the core's events into spans. Imported (dynamically) only when settings.ts says
// tracing is on: a daemon without it loads none of this.
import { context, trace } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import {
  defaultResource,
  detectResources,
  envDetector,
  resourceFromAttributes,
} from '@opentelemetry/resources';
import { BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import type { Logger } from 'pino';
import type { Redact } from '../secrets/redact.ts';
import { GuardedExporter } from './guarded-exporter.ts';
import { listenForTraces } from './listener.ts';
import { PrimedIdGenerator } from './primed-ids.ts';
import { DEFAULT_SERVICE_NAME, SHUTDOWN_FLUSH_MS } from './settings.ts';
import type { TraceHook } from './trace-hook.ts';

export interface TracingOptions {
  /** Where export failures are told (once per run of failures). */
  logger?: Logger;
  /** Cleans the daemon's secrets out of every span before it leaves (handler code may record anything). */
  redact: Redact;
  /** service.instance.id: the replica id in clustered mode, else the host name. */
  instanceId: string;
  version: string;
}

export interface Tracing extends TraceHook {
  /** A pino mixin: `trace_id` and `span_id` of the span active where a line is logged. */
  logFields: () => Record<string, string>;
  /** Where export failures are told from now on. */
  useLogger: (logger: Logger) => void;
  /** Flushes, then stops the SDK; within the bound a flush() before it began (SHUTDOWN_FLUSH_MS in all). */
  shutdown: () => Promise<void>;
}

export function startTracing(options: TracingOptions): Tracing {
  // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win over df-worker's defaults.
  const resource = defaultResource()
    .merge(
      resourceFromAttributes({
        'service.name': DEFAULT_SERVICE_NAME,
        'service.version': options.version,
        'service.instance.id': options.instanceId,
      }),
    )
    .merge(detectResources({ detectors: [envDetector] }));
  const exporter = new GuardedExporter(new OTLPTraceExporter(), options.redact, options.logger);
  const processor = new BatchSpanProcessor(exporter);
  const ids = new PrimedIdGenerator();
  const provider = new NodeTracerProvider({ resource, idGenerator: ids, spanProcessors: [processor] });
  // Global, so that handlers run in this process (DF_HANDLER_ISOLATION=none) nest their spans in ours.
  provider.register();
  const tracer = trace.getTracer('df-worker', options.version);
  // One bound for the whole stop: the core's flush and the shutdown after it share it.
  let stopBy: number | undefined;
  const bounded = (work: Promise<unknown>) => {
    stopBy ??= performance.now() + SHUTDOWN_FLUSH_MS;
    return withinBound(work, Math.max(0, stopBy - performance.now()));
  };
  return {
    listen: (events, info) =>
      listenForTraces(events, { tracer, ids, processor, resource, replica: info.replica }),
    flush: () => bounded(provider.forceFlush()),
    shutdown: () => bounded(provider.shutdown()),
    useLogger: (logger) => exporter.useLogger(logger),
    logFields: (): Record<string, string> => {
      const span = trace.getSpan(context.active());
      if (span === undefined) return {};
      const { traceId, spanId } = span.spanContext();
      return { trace_id: traceId, span_id: spanId };
    },
  };
}

/** Resolves when `work` settles or `ms` passed, whichever is first; never rejects. */
async function withinBound(work: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, ms);
    timer.unref();
  });
  await Promise.race([
    work.then(
      () => undefined,
      () => undefined,
    ),
    expired,
  ]);
  clearTimeout(timer);
}
