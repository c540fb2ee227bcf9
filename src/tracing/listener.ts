// The core's events as spans: one trace per execution, from the poll that claimed it to its report. Like
// daemon/telemetry-listener.ts for metrics, the one place traces derive from, the same in both modes; loaded
// only when tracing is on (sdk.ts). In clustered mode the trace crosses replicas in the job: the coordinator
// decides the root span as its poll claims, and the replica that runs the execution makes that same root span.
import {
  context,
  propagation,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type Span,
  type Tracer,
} from '@opentelemetry/api';
import type { Resource } from '@opentelemetry/resources';
import type { SpanProcessor } from '@opentelemetry/sdk-trace-base';
import type { ClaimOrigin, WorkerEventMap, WorkerEvents } from '../events/worker-events.ts';
import type { ExecutionScope, TraceSlot, WorkerHooks } from '../events/hooks.ts';
import { readableSpans, spanUpdate } from './forwarded-span.ts';
import type { PrimedIdGenerator } from './primed-ids.ts';

export interface TraceListenerOptions {
  tracer: Tracer;
  ids: PrimedIdGenerator;
  /** Where spans a handler worker forwarded go (the exporting processor), as spans of `resource`. */
  processor: SpanProcessor;
  resource: Resource;
  /** This replica's id (clustered mode). */
  replica?: string | undefined;
}

/** Span names: what an operator searches for. */
export const SPAN = {
  execution: 'df-worker.execution',
  poll: 'df-worker.poll',
  queue: 'df-worker.queue',
  attempt: 'df-worker.attempt',
  report: 'df-worker.report',
  serviceCall: 'df-worker.service',
} as const;

/** Where, in the job's trace context, the coordinator writes when the root span began (epoch ms). */
const ROOT_START = 'df-worker-start';
/** Claims whose poll span is kept for their claim event: a bound against claims that never arrive. */
const MAX_PENDING = 1_000;

interface Traced {
  root: Span;
  context: Context;
  attempts: Map<number, Span>;
  report?: Span;
  /**
   * The root came with the job (clustered): a replica that leaves the execution unreported (it stops, or lost
   * the job's lock) does not end it, for the replica that takes the job up makes and ends that same span.
   */
  fromJob: boolean;
}

export function listenForTraces(events: WorkerEvents, o: TraceListenerOptions): WorkerHooks {
  const { tracer } = o;
  /** Root spans begun by a poll that claimed, until the claim (or its queueing) takes them. */
  const polled = new Map<string, Span>();
  const running = new Map<string, Traced>();
  const replica = o.replica === undefined ? {} : { 'df_worker.replica': o.replica };

  events.on(
    'poll',
    guard(({ task, result, durationMs, claimed }) => {
      if (result !== 'hit' || claimed === undefined) return;
      const now = Date.now();
      const started = now - durationMs;
      const root = tracer.startSpan(SPAN.execution, {
        root: true,
        startTime: started,
        attributes: executionAttributes(task, claimed.executionId),
      });
      const created = Date.parse(claimed.createdAt);
      tracer
        .startSpan(
          SPAN.poll,
          {
            kind: SpanKind.CLIENT,
            startTime: started,
            attributes: {
              ...executionAttributes(task, claimed.executionId),
              ...replica,
              ...(Number.isFinite(created)
                ? {
                    'df_worker.execution.created_at': claimed.createdAt,
                    'df_worker.pickup_latency_ms': Math.max(0, now - created),
                  }
                : {}),
            },
          },
          trace.setSpan(ROOT_CONTEXT, root),
        )
        .end(now);
      if (polled.size >= MAX_PENDING) polled.delete(polled.keys().next().value!);
      polled.set(claimed.executionId, root);
    }),
  );

  events.on(
    'attempt',
    guard((event) => {
      const traced = running.get(event.executionId);
      if (!traced) return;
      if (event.phase === 'start') return;
      const span = traced.attempts.get(event.attempt);
      if (!span) return;
      traced.attempts.delete(event.attempt);
      span.setAttribute('df_worker.attempt.result', event.result);
      if (event.error) {
        span.setAttributes({
          'error.type': event.error.name,
          'df_worker.error.message': event.error.message,
        });
        span.setStatus({ code: SpanStatusCode.ERROR, message: event.error.message });
      } else if (event.result !== 'returned') {
        span.setStatus({ code: SpanStatusCode.ERROR, message: event.result });
      }
      span.end();
    }),
  );

  events.on(
    'serviceCall',
    guard((event) => {
      const traced = running.get(event.executionId);
      const attempt = traced?.attempts.get(event.attempt);
      if (!traced || !attempt) return;
      const url = safeUrl(event.url);
      const attributes: Attributes = {
        'http.request.method': event.method,
        'df_worker.operation': event.operation,
        ...(url
          ? {
              'url.full': url.href,
              'server.address': url.hostname,
              ...(url.port === '' ? {} : { 'server.port': Number(url.port) }),
            }
          : {}),
        ...(event.status > 0 ? { 'http.response.status_code': event.status } : {}),
      };
      const failed = event.error !== undefined || event.status >= 400 || event.status === 0;
      if (failed)
        attributes['error.type'] = event.error?.name ?? (event.status > 0 ? String(event.status) : 'Error');
      const span = tracer.startSpan(
        `${SPAN.serviceCall} ${event.operation}`,
        { kind: SpanKind.CLIENT, startTime: event.startedAt, attributes },
        trace.setSpan(traced.context, attempt),
      );
      if (failed)
        span.setStatus({
          code: SpanStatusCode.ERROR,
          ...(event.error ? { message: event.error.message } : {}),
        });
      span.end(event.startedAt + event.durationMs);
    }),
  );

  events.on(
    'outcome',
    guard(({ executionId, outcome }) => {
      const traced = running.get(executionId);
      if (!traced) return;
      traced.root.setAttributes({
        'df_worker.execution.status': outcome.status,
        'df_worker.execution.attempts': outcome.attempts,
        ...(outcome.failure ? { 'df_worker.failure.kind': outcome.failure.kind } : {}),
      });
      if (outcome.status === 'FAILED')
        traced.root.setStatus({ code: SpanStatusCode.ERROR, message: outcome.failure?.message ?? 'FAILED' });
      traced.report = tracer.startSpan(SPAN.report, { kind: SpanKind.CLIENT }, traced.context);
    }),
  );

  events.on(
    'reportRetry',
    guard(({ executionId, attempt, error }) => {
      running.get(executionId)?.report?.addEvent('report.retry', {
        'df_worker.report.attempt': attempt,
        'error.type': error.name,
        'df_worker.error.message': error.message,
      });
    }),
  );

  events.on(
    'report',
    guard(({ executionId, result, attempts }) => {
      const traced = running.get(executionId);
      if (!traced) return;
      running.delete(executionId);
      const report =
        traced.report ?? tracer.startSpan(SPAN.report, { kind: SpanKind.CLIENT }, traced.context);
      report.setAttributes({ 'df_worker.report.result': result, 'df_worker.report.attempts': attempts });
      if (result !== 'delivered') report.setStatus({ code: SpanStatusCode.ERROR, message: result });
      report.end();
      if (result === 'left-in-journal' && traced.fromJob) return;
      traced.root.setAttribute('df_worker.report.result', result);
      traced.root.end();
    }),
  );

  events.on(
    'fenced',
    guard(({ request, executionId }) => {
      if (request !== 'report' || executionId === undefined) return;
      const traced = running.get(executionId);
      if (!traced) return;
      running.delete(executionId);
      traced.report?.setAttribute('df_worker.report.result', 'fenced').end();
      if (traced.fromJob) return;
      traced.root.setAttribute('df_worker.report.result', 'fenced');
      traced.root.end();
    }),
  );

  /** The spans as contexts the core runs in, and the trace context a queued job carries. */
  return {
    executionScope: guarded((claim): ExecutionScope | undefined => {
      const traced = rootOf(claim);
      running.set(claim.executionId, traced);
      queueSpan(claim, traced);
      return { run: (fn) => context.with(traced.context, fn) };
    }),
    jobHeaders: guarded(({ executionId }) => {
      const root = polled.get(executionId);
      polled.delete(executionId);
      if (!root) return undefined;
      // This process does not end this root span: the replica that runs the execution makes it again.
      const headers: Record<string, string> = {};
      propagation.inject(trace.setSpan(ROOT_CONTEXT, root), headers);
      headers[ROOT_START] = String(startOf(root) ?? Date.now());
      return headers;
    }),
    attemptTrace: guarded((event): TraceSlot | undefined => {
      const traced = running.get(event.executionId);
      if (!traced) return undefined;
      const span = tracer.startSpan(
        SPAN.attempt,
        { attributes: { 'df_worker.task.key': event.task, 'df_worker.attempt': event.attempt } },
        traced.context,
      );
      traced.attempts.set(event.attempt, span);
      return attemptSlot(span, traced.context, o);
    }),
  };

  /** The span of the execution's time in the cluster's queue, when it came through it. */
  function queueSpan(event: WorkerEventMap['claim'][0], traced: Traced): void {
    const origin = event.origin;
    if (origin?.queuedAt === undefined) return;
    tracer
      .startSpan(
        SPAN.queue,
        {
          kind: SpanKind.CONSUMER,
          startTime: origin.queuedAt,
          attributes: {
            ...executionAttributes(event.task, event.executionId),
            ...(origin.claimedBy === undefined ? {} : { 'df_worker.replica.claimed_by': origin.claimedBy }),
            ...(origin.runBy === undefined ? {} : { 'df_worker.replica.run_by': origin.runBy }),
          },
        },
        traced.context,
      )
      .end();
  }

  /** The execution's root span: from its poll here, from the job's trace context, or a new one. */
  function rootOf(event: WorkerEventMap['claim'][0]): Traced {
    const attributes: Attributes = {
      ...executionAttributes(event.task, event.executionId),
      ...replica,
      ...(event.resumed ? { 'df_worker.resumed': true } : {}),
      ...(event.jobId === undefined ? {} : { 'df_worker.job.id': event.jobId }),
    };
    let root = polled.get(event.executionId);
    polled.delete(event.executionId);
    let fromJob = false;
    if (root) {
      root.setAttributes(attributes);
    } else {
      const decided = fromOrigin(event.origin, attributes);
      fromJob = decided !== undefined;
      root = decided ?? tracer.startSpan(SPAN.execution, { root: true, attributes });
    }
    return { root, context: trace.setSpan(ROOT_CONTEXT, root), attempts: new Map(), fromJob };
  }

  /**
   * The root span the coordinator decided, made here with its ids: on the replica that runs the execution
   * first, or on the one that takes it up after that replica died, stopped or stalled (which did not end it).
   */
  function fromOrigin(origin: ClaimOrigin | undefined, attributes: Attributes): Span | undefined {
    const carrier = origin?.traceContext;
    if (!carrier) return undefined;
    const decided = trace.getSpanContext(propagation.extract(ROOT_CONTEXT, carrier));
    if (!decided || !trace.isSpanContextValid(decided)) return undefined;
    const start = Number(carrier[ROOT_START]);
    const startTime = Number.isFinite(start) && start > 0 ? start : undefined;
    o.ids.prime(decided.traceId, decided.spanId);
    return tracer.startSpan(SPAN.execution, { root: true, attributes, ...(startTime ? { startTime } : {}) });
  }
}

/** A span that cannot be made must never fail the execution it describes: the core emits synchronously. */
function guard<A extends unknown[]>(listener: (...args: A) => void): (...args: A) => void {
  return (...args) => {
    try {
      listener(...args);
    } catch {
      // Traces are best effort; the execution goes on.
    }
  };
}

function executionAttributes(task: string, executionId: string): Attributes {
  return { 'df_worker.task.key': task, 'df_worker.execution.id': executionId };
}

/** A hook that cannot trace must never fail the execution it was asked for: it contributes nothing then. */
function guarded<A extends unknown[], R>(hook: (...args: A) => R | undefined): (...args: A) => R | undefined {
  return (...args) => {
    try {
      return hook(...args);
    } catch {
      return undefined;
    }
  };
}

/** The attempt's span for the handler: itself inline, its trace context for a worker, and what comes back. */
function attemptSlot(span: Span, parent: Context, o: TraceListenerOptions): TraceSlot {
  const active = trace.setSpan(parent, span);
  const headers: Record<string, string> = {};
  propagation.inject(active, headers);
  const slot: TraceSlot = { span, headers, run: (fn) => context.with(active, fn) };
  slot.ingest = (spans) => {
    for (const readable of readableSpans(spans, o.resource)) o.processor.onEnd(readable);
  };
  slot.update = (raw) => {
    const update = spanUpdate(raw);
    if (update?.op === 'setAttributes') span.setAttributes(update.attributes);
    else if (update?.op === 'addEvent') span.addEvent(update.name, update.attributes, update.time);
    else if (update?.op === 'setStatus')
      span.setStatus(
        update.message === undefined ? { code: update.code } : { code: update.code, message: update.message },
      );
  };
  return slot;
}

/** When a span of this SDK began, in epoch ms (its startTime is not on the API's Span). */
function startOf(span: Span): number | undefined {
  const start = (span as { startTime?: unknown }).startTime;
  if (!Array.isArray(start) || typeof start[0] !== 'number' || typeof start[1] !== 'number') return undefined;
  return start[0] * 1000 + start[1] / 1e6;
}

function safeUrl(url: string): URL | undefined {
  try {
    const parsed = new URL(url);
    parsed.search = '';
    parsed.username = '';
    parsed.password = '';
    return parsed;
  } catch {
    return undefined;
  }
}
