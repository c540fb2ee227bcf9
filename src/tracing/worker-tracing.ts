// Tracing inside a handler worker (thread or process), loaded only once an attempt arrives with a trace: a
// tracer provider registered for the handler's `@opentelemetry/api`, whose ended spans are sent to the daemon
// (forwarded-span.ts) rather than exported from here, and `ctx.span`, a stand-in for the attempt's span that
// lives in the daemon: its calls cross as messages, and spans started under it are its children.
import { AsyncLocalStorage } from 'node:async_hooks';
import { createRequire } from 'node:module';
import {
  context,
  ROOT_CONTEXT,
  trace,
  type Attributes,
  type Context,
  type ContextManager,
  type Exception,
  type HrTime,
  type Link,
  type Span,
  type SpanAttributeValue,
  type SpanContext,
  type SpanStatus,
  type TimeInput,
  type Tracer,
  type TracerProvider,
} from '@opentelemetry/api';
import type { ReadableSpan, SpanProcessor } from '@opentelemetry/sdk-trace-base';
import type * as SdkTraceNode from '@opentelemetry/sdk-trace-node';
import type { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { forwardedSpan, type ForwardedSpan, type SpanUpdate } from './forwarded-span.ts';

export interface WorkerTracing {
  /** The attempt's span stand-in and a runner of the handler in its context; undefined for a bad traceparent. */
  attempt(
    headers: Record<string, string>,
    update: (update: SpanUpdate) => void,
  ): { span: Span; run: <T>(fn: () => T) => T } | undefined;
}

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/**
 * Registers, for the handler's `@opentelemetry/api`, a context manager and a tracer provider that loads the SDK
 * only when handler code first starts a span: a handler that only uses ctx.span, or nothing, never pays for it
 * (some 75 ms and several MB per worker). Each span that ends goes to `send` at once.
 */
export function startWorkerTracing(send: (spans: ForwardedSpan[]) => void): WorkerTracing {
  context.setGlobalContextManager(new AsyncLocalContextManager());
  trace.setGlobalTracerProvider(new SdkOnFirstSpan(send));
  return {
    attempt(headers, update) {
      const match = TRACEPARENT.exec(headers.traceparent ?? '');
      if (!match) return undefined;
      const spanContext: SpanContext = {
        traceId: match[1]!,
        spanId: match[2]!,
        traceFlags: Number.parseInt(match[3]!, 16),
        isRemote: true,
      };
      const span = new AttemptSpanStandIn(spanContext, update);
      const active: Context = trace.setSpan(ROOT_CONTEXT, span);
      return { span, run: (fn) => context.with(active, fn) };
    },
  };
}

/** The active context follows async continuations (as the SDK's AsyncLocalStorageContextManager does). */
class AsyncLocalContextManager implements ContextManager {
  readonly #storage = new AsyncLocalStorage<Context>();

  active(): Context {
    return this.#storage.getStore() ?? ROOT_CONTEXT;
  }

  with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(
    active: Context,
    fn: F,
    thisArg?: ThisParameterType<F>,
    ...args: A
  ): ReturnType<F> {
    return this.#storage.run(active, () => fn.call(thisArg, ...args));
  }

  bind<T>(active: Context, target: T): T {
    if (typeof target !== 'function') return target;
    const run = (...args: unknown[]): unknown =>
      this.with(active, () => (target as (...a: unknown[]) => unknown)(...args));
    return run as T;
  }

  enable(): this {
    return this;
  }

  disable(): this {
    this.#storage.disable();
    return this;
  }
}

/** Tracers whose spans are the SDK's, the SDK loaded (synchronously: it is CommonJS) at the first span. */
class SdkOnFirstSpan implements TracerProvider {
  readonly #send: (spans: ForwardedSpan[]) => void;
  #provider: NodeTracerProvider | undefined;

  constructor(send: (spans: ForwardedSpan[]) => void) {
    this.#send = send;
  }

  getTracer(name: string, version?: string, options?: { schemaUrl?: string }): Tracer {
    const real = () => this.#sdk().getTracer(name, version, options);
    return {
      startSpan: (...args) => real().startSpan(...args),
      startActiveSpan: ((...args: Parameters<Tracer['startActiveSpan']>) =>
        (real().startActiveSpan as (...a: unknown[]) => unknown)(...args)) as Tracer['startActiveSpan'],
    };
  }

  #sdk(): NodeTracerProvider {
    if (this.#provider) return this.#provider;
    const require = createRequire(import.meta.url);
    const sdk = require('@opentelemetry/sdk-trace-node') as typeof SdkTraceNode;
    const forward: SpanProcessor = {
      onStart: () => undefined,
      onEnd: (span: ReadableSpan) => this.#send([forwardedSpan(span)]),
      forceFlush: () => Promise.resolve(),
      shutdown: () => Promise.resolve(),
    };
    // The sampler follows the attempt's traceparent (the daemon's decision); OTEL_* variables are not in a
    // handler's environment. Not registered: this provider and the context manager above are.
    this.#provider = new sdk.NodeTracerProvider({ spanProcessors: [forward] });
    return this.#provider;
  }
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
