// `ctx.span` while tracing is off: a span that records nothing, made here rather than taken from
// @opentelemetry/api so that a daemon without tracing loads no OpenTelemetry code at all.
import type { Span, SpanContext } from '@opentelemetry/api';

/** The invalid span context of the W3C spec (all zeros, not sampled): what a non-recording span carries. */
const INVALID_CONTEXT: SpanContext = {
  traceId: '00000000000000000000000000000000',
  spanId: '0000000000000000',
  traceFlags: 0,
};

/** Records nothing; every call returns at once. */
export const noopSpan: Span = Object.freeze({
  spanContext: () => INVALID_CONTEXT,
  setAttribute() {
    return this;
  },
  setAttributes() {
    return this;
  },
  addEvent() {
    return this;
  },
  addLink() {
    return this;
  },
  addLinks() {
    return this;
  },
  setStatus() {
    return this;
  },
  updateName() {
    return this;
  },
  end: () => undefined,
  isRecording: () => false,
  recordException: () => undefined,
});
