// What a trace listener may hand back to the code that emitted an event: a way to run the rest of that work
// (an execution, a handler attempt) inside a span's context. Plain functions and strings, so neither the core
// nor the runner loads OpenTelemetry: with tracing off, nobody fills the slot and nothing is wrapped.
import type { Span } from '@opentelemetry/api';

export interface TraceSlot {
  /** Runs `fn` with the span active (its log lines carry the trace; a handler's own spans nest under it). */
  run?: <T>(fn: () => T) => T;
  /** The span itself: a handler running on the daemon's own loop gets it as `ctx.span`. */
  span?: Span;
  /** W3C trace-context headers (`traceparent`) of the span, for a handler worker to continue the trace. */
  headers?: Record<string, string>;
  /** Spans a handler worker made and ended, serialised (see tracing/forwarded-span.ts). */
  ingest?: (spans: readonly unknown[]) => void;
  /** A handler worker's `ctx.span` calls (setAttribute, addEvent...), applied to the span. */
  update?: (operation: unknown) => void;
}
