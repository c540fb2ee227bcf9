// The OTLP exporter as the daemon uses it: every span cleaned of the daemon's secrets before it leaves, and a
// collector that is down or slow told once in the log (and once when it is back), never thrown at the daemon.
// The exporter's own timeout (OTEL_EXPORTER_OTLP_TRACES_TIMEOUT, default 10 s) bounds each export, and the
// batch processor drops spans past its queue (OTEL_BSP_MAX_QUEUE_SIZE) rather than hold them.
import type { Attributes } from '@opentelemetry/api';
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace-base';
import type { Logger } from 'pino';
import type { Redact } from '../secrets/redact.ts';

type ExportResult = Parameters<Parameters<SpanExporter['export']>[1]>[0];

/** ExportResultCode.SUCCESS of @opentelemetry/core (not a dependency of df-worker's own). */
const SUCCESS = 0;

export class GuardedExporter implements SpanExporter {
  readonly #inner: SpanExporter;
  readonly #redact: Redact;
  #logger: Logger | undefined;
  /** Spans lost since exports began failing; undefined while they succeed. */
  #failing: number | undefined;

  constructor(inner: SpanExporter, redact: Redact, logger?: Logger) {
    this.#inner = inner;
    this.#redact = redact;
    this.#logger = logger;
  }

  useLogger(logger: Logger): void {
    this.#logger = logger;
  }

  export(spans: ReadableSpan[], done: (result: ExportResult) => void): void {
    for (const span of spans) this.#clean(span);
    try {
      this.#inner.export(spans, (result) => {
        this.#tell(result, spans.length);
        done(result);
      });
    } catch (error) {
      const result: ExportResult = { code: 1, error: error as Error };
      this.#tell(result, spans.length);
      done(result);
    }
  }

  shutdown(): Promise<void> {
    return this.#inner.shutdown();
  }

  forceFlush(): Promise<void> {
    return this.#inner.forceFlush?.() ?? Promise.resolve();
  }

  #tell(result: ExportResult, count: number): void {
    if (Number(result.code) === SUCCESS) {
      if (this.#failing !== undefined) {
        this.#logger?.info({ spansLost: this.#failing }, 'traces reach the collector again');
        this.#failing = undefined;
      }
      return;
    }
    if (this.#failing === undefined) {
      this.#logger?.warn(
        { err: result.error, spans: count },
        'could not export traces to the collector (OTEL_EXPORTER_OTLP_ENDPOINT); spans are dropped until it answers',
      );
      this.#failing = 0;
    }
    this.#failing += count;
  }

  /** The daemon's secrets out of the span's name, attributes, events and status, in place. */
  #clean(span: ReadableSpan): void {
    const writable = span as { -readonly [K in keyof ReadableSpan]: ReadableSpan[K] };
    writable.name = this.#redact(span.name);
    this.#cleanAttributes(span.attributes);
    for (const event of span.events) if (event.attributes) this.#cleanAttributes(event.attributes);
    if (span.status.message !== undefined) span.status.message = this.#redact(span.status.message);
  }

  #cleanAttributes(attributes: Attributes): void {
    for (const [key, value] of Object.entries(attributes)) {
      if (typeof value === 'string') attributes[key] = this.#redact(value);
      else if (Array.isArray(value))
        attributes[key] = value.map((v: unknown) =>
          typeof v === 'string' ? this.#redact(v) : v,
        ) as typeof value;
    }
  }
}
