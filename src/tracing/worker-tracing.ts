// Tracing inside a handler worker (thread or process), loaded only once an attempt arrives with a trace: a
// tracer provider registered for the handler's `@opentelemetry/api`, whose ended spans are sent to the daemon
// (forwarded-span.ts) rather than exported from here, and `ctx.span`, a stand-in for the attempt's span that
// lives in the daemon: its calls cross as messages, and spans started under it are its children.
import {
  context,
  INVALID_SPAN_CONTEXT,
  propagation,
  trace,
  type Attributes,
  type Context,
  type Exception,
  type HrTime,
  type Link,
  type Span,
  type SpanAttributeValue,
  type SpanContext,
  type SpanStatus,
  type TimeInput,
} from '@opentelemetry/api';
import type { ReadableSpan, SpanProcessor } from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { forwardedSpan, type ForwardedSpan, type SpanUpdate } from './forwarded-span.ts';

export interface WorkerTracing {
  /** The attempt's span stand-in and a runner of the handler in its context. */
  attempt(
    headers: Record<string, string>,
    update: (update: SpanUpdate) => void,
  ): { span: Span; run: <T>(fn: () => T) => T };
}

/** Registers the worker's provider; each span that ends goes to `send` at once (one message per span). */
export function startWorkerTracing(send: (spans: ForwardedSpan[]) => void): WorkerTracing {
  const forward: SpanProcessor = {
    onStart: () => undefined,
    onEnd: (span: ReadableSpan) => send([forwardedSpan(span)]),
    forceFlush: () => Promise.resolve(),
    shutdown: () => Promise.resolve(),
  };
  // The sampler follows the attempt's traceparent (the daemon's decision); OTEL_* variables are not in a
  // handler's environment.
  const provider = new NodeTracerProvider({ spanProcessors: [forward] });
  provider.register();
  return {
    attempt(headers, update) {
      const parent = propagation.extract(context.active(), headers);
      const spanContext = trace.getSpanContext(parent);
      if (spanContext === undefined) {
        return { span: trace.wrapSpanContext(INVALID_SPAN_CONTEXT), run: (fn) => fn() };
      }
      const span = new AttemptSpanStandIn(spanContext, update);
      const active: Context = trace.setSpan(parent, span);
      return { span, run: (fn) => context.with(active, fn) };
    },
  };
}

/** `ctx.span` in a worker: forwards what the handler records; `end()` is the daemon's to call. */
class AttemptSpanStandIn implements Span {
  readonly #context: SpanContext;
  readonly #update: (update: SpanUpdate) => void;

  constructor(spanContext: SpanContext, update: (update: SpanUpdate) => void) {
    this.#context = spanContext;
    this.#update = update;
  }

  spanContext(): SpanContext {
    return this.#context;
  }

  setAttribute(key: string, value: SpanAttributeValue): this {
    return this.setAttributes({ [key]: value });
  }

  setAttributes(attributes: Attributes): this {
    this.#update({ op: 'setAttributes', attributes });
    return this;
  }

  addEvent(name: string, attributesOrTime?: Attributes | TimeInput, time?: TimeInput): this {
    const attributes = isAttributes(attributesOrTime) ? attributesOrTime : undefined;
    const at = hrTime(isAttributes(attributesOrTime) ? time : (attributesOrTime ?? time));
    this.#update({
      op: 'addEvent',
      name,
      ...(attributes ? { attributes } : {}),
      ...(at ? { time: at } : {}),
    });
    return this;
  }

  addLink(_link: Link): this {
    return this;
  }

  addLinks(_links: Link[]): this {
    return this;
  }

  setStatus(status: SpanStatus): this {
    this.#update({
      op: 'setStatus',
      code: status.code,
      ...(status.message ? { message: status.message } : {}),
    });
    return this;
  }

  updateName(_name: string): this {
    return this;
  }

  end(): void {}

  isRecording(): boolean {
    return (this.#context.traceFlags & 1) === 1;
  }

  recordException(exception: Exception): void {
    const error = typeof exception === 'string' ? { message: exception } : exception;
    this.addEvent('exception', {
      'exception.type': String(error.name ?? ('code' in error ? error.code : 'Error')),
      'exception.message': String(error.message ?? ''),
    });
  }
}

function isAttributes(value: unknown): value is Attributes {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && !(value instanceof Date);
}

/** A TimeInput as HrTime (epoch), or undefined for "now" (the daemon stamps it). */
function hrTime(time: TimeInput | undefined): HrTime | undefined {
  if (time === undefined) return undefined;
  if (Array.isArray(time)) return time;
  const ms = time instanceof Date ? time.getTime() : time;
  return [Math.floor(ms / 1000), Math.round((ms % 1000) * 1e6)];
}
