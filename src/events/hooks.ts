// What a listener may contribute to the work it hears of, apart from the events (events tell; hooks ask), as
// Temporal's interceptors are apart from its events. Tracing registers these (tracing/listener.ts); without
// it every hook is absent and nothing is wrapped. Plain functions and strings: neither the core nor the runner
// loads OpenTelemetry.
import type { Span } from '@opentelemetry/api';
import type { WorkerEventMap } from './worker-events.ts';

/** Runs work inside a context (a span's): log lines written meanwhile carry its trace. */
export interface ExecutionScope {
  run: <T>(fn: () => T) => T;
}

/** An attempt's span, as the code that runs the attempt (inline, or in a handler worker) needs it. */
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

export interface WorkerHooks {
  /**
   * The context an execution runs in, asked as it enters the pipeline (just before its `claim` event): the
   * rest of the execution, its log lines included, runs in it.
   */
  executionScope?(claim: WorkerEventMap['claim'][0]): ExecutionScope | undefined;
  /**
   * Headers that travel with a claimed execution in the cluster's queue (W3C `traceparent`), asked just
   * before its `queued` event: the replica that runs the job continues that trace.
   */
  jobHeaders?(queued: WorkerEventMap['queued'][0]): Readonly<Record<string, string>> | undefined;
  /** A span around one handler attempt, asked as it starts (just before its `attempt` start event). */
  attemptTrace?(attempt: {
    readonly task: string;
    readonly executionId: string;
    readonly attempt: number;
  }): TraceSlot | undefined;
}

/** No listener contributes: what the core runs with when tracing is off. */
export const NO_HOOKS: WorkerHooks = Object.freeze({});
