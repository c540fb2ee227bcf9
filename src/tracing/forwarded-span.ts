// Spans a handler makes in a worker (thread or process) cross to the daemon as plain data and leave with the
// daemon's own: one exporter, one resource, and the collector's address and headers (which may hold a token)
// never enter the handlers' environment. This module turns an ended span into that data and back, and checks
// what comes back: it was written by handler code's process.
import type { Attributes, AttributeValue, HrTime, SpanContext, SpanStatus } from '@opentelemetry/api';
import type { Resource } from '@opentelemetry/resources';
import type { ReadableSpan, TimedEvent } from '@opentelemetry/sdk-trace-base';

/** An ended span as it crosses from a handler worker. */
export interface ForwardedSpan {
  name: string;
  kind: number;
  traceId: string;
  spanId: string;
  traceFlags: number;
  parentSpanId?: string;
  startTime: HrTime;
  endTime: HrTime;
  attributes: Attributes;
  events: { name: string; time: HrTime; attributes?: Attributes }[];
  status: { code: number; message?: string };
  scope: { name: string; version?: string };
}

/** A call a handler made on `ctx.span` in a worker, applied to the attempt's span in the daemon. */
export type SpanUpdate =
  | { op: 'setAttributes'; attributes: Attributes }
  | { op: 'addEvent'; name: string; attributes?: Attributes; time?: HrTime }
  | { op: 'setStatus'; code: number; message?: string };

/** Most spans taken from one message: a handler that floods gets the rest dropped, not the daemon's memory. */
const MAX_SPANS_PER_MESSAGE = 512;
const HEX_TRACE = /^[0-9a-f]{32}$/;
const HEX_SPAN = /^[0-9a-f]{16}$/;

export function forwardedSpan(span: ReadableSpan): ForwardedSpan {
  const context = span.spanContext();
  const parent = span.parentSpanContext;
  return {
    name: span.name,
    kind: span.kind,
    traceId: context.traceId,
    spanId: context.spanId,
    traceFlags: context.traceFlags,
    ...(parent ? { parentSpanId: parent.spanId } : {}),
    startTime: span.startTime,
    endTime: span.endTime,
    attributes: span.attributes,
    events: span.events.map((e) => ({
      name: e.name,
      time: e.time,
      ...(e.attributes ? { attributes: e.attributes } : {}),
    })),
    status: span.status.message === undefined ? { code: span.status.code } : { ...span.status },
    scope: { name: span.instrumentationScope.name, ...optionalVersion(span.instrumentationScope.version) },
  };
}

/** The spans of a worker's message, as spans of this process (`resource`); what is malformed is dropped. */
export function readableSpans(spans: readonly unknown[], resource: Resource): ReadableSpan[] {
  const out: ReadableSpan[] = [];
  for (const raw of spans.slice(0, MAX_SPANS_PER_MESSAGE)) {
    const span = readableSpan(raw, resource);
    if (span) out.push(span);
  }
  return out;
}

function readableSpan(raw: unknown, resource: Resource): ReadableSpan | undefined {
  if (!isObject(raw)) return undefined;
  const { name, kind, traceId, spanId, traceFlags, parentSpanId, startTime, endTime, scope } = raw;
  if (typeof name !== 'string' || typeof traceId !== 'string' || !HEX_TRACE.test(traceId)) return undefined;
  if (typeof spanId !== 'string' || !HEX_SPAN.test(spanId)) return undefined;
  if (parentSpanId !== undefined && (typeof parentSpanId !== 'string' || !HEX_SPAN.test(parentSpanId)))
    return undefined;
  if (!isHrTime(startTime) || !isHrTime(endTime)) return undefined;
  const flags = typeof traceFlags === 'number' ? traceFlags & 0xff : 1;
  const context: SpanContext = { traceId, spanId, traceFlags: flags };
  const status = isObject(raw.status) ? spanStatus(raw.status) : { code: 0 };
  const scopeName = isObject(scope) && typeof scope.name === 'string' ? scope.name : 'handler';
  const scopeVersion = isObject(scope) && typeof scope.version === 'string' ? scope.version : undefined;
  return {
    name,
    kind: typeof kind === 'number' && kind >= 0 && kind <= 4 ? kind : 0,
    spanContext: () => context,
    ...(parentSpanId === undefined
      ? {}
      : { parentSpanContext: { traceId, spanId: parentSpanId, traceFlags: flags, isRemote: true } }),
    startTime,
    endTime,
    status,
    attributes: attributesOf(raw.attributes),
    links: [],
    events: Array.isArray(raw.events) ? raw.events.flatMap(timedEvent) : [],
    duration: hrDuration(startTime, endTime),
    ended: true,
    resource,
    instrumentationScope: { name: scopeName, ...optionalVersion(scopeVersion) },
    droppedAttributesCount: 0,
    droppedEventsCount: 0,
    droppedLinksCount: 0,
  };
}

/** A worker's `ctx.span` call, checked; undefined when it is not one. */
export function spanUpdate(raw: unknown): SpanUpdate | undefined {
  if (!isObject(raw)) return undefined;
  if (raw.op === 'setAttributes') return { op: 'setAttributes', attributes: attributesOf(raw.attributes) };
  if (raw.op === 'addEvent' && typeof raw.name === 'string') {
    return {
      op: 'addEvent',
      name: raw.name,
      attributes: attributesOf(raw.attributes),
      ...(isHrTime(raw.time) ? { time: raw.time } : {}),
    };
  }
  if (raw.op === 'setStatus' && typeof raw.code === 'number') {
    return { op: 'setStatus', ...spanStatus(raw) };
  }
  return undefined;
}

function timedEvent(raw: unknown): TimedEvent[] {
  if (!isObject(raw) || typeof raw.name !== 'string' || !isHrTime(raw.time)) return [];
  return [{ name: raw.name, time: raw.time, attributes: attributesOf(raw.attributes) }];
}

function spanStatus(raw: Record<string, unknown>): SpanStatus {
  const code = raw.code === 1 || raw.code === 2 ? raw.code : 0;
  return typeof raw.message === 'string' ? { code, message: raw.message } : { code };
}

/** Attribute values as OpenTelemetry allows them: strings, numbers, booleans, or arrays of one of those. */
export function attributesOf(raw: unknown): Attributes {
  const out: Attributes = {};
  if (!isObject(raw)) return out;
  for (const [key, value] of Object.entries(raw)) {
    if (isAttributeValue(value)) out[key] = value;
  }
  return out;
}

function isAttributeValue(value: unknown): value is AttributeValue {
  const type = typeof value;
  if (type === 'string' || type === 'number' || type === 'boolean') return true;
  return (
    Array.isArray(value) &&
    value.every((v) => v === null || v === undefined || ['string', 'number', 'boolean'].includes(typeof v))
  );
}

function isHrTime(value: unknown): value is HrTime {
  return (
    Array.isArray(value) &&
    value.length === 2 &&
    Number.isSafeInteger(value[0]) &&
    Number.isSafeInteger(value[1]) &&
    (value[1] as number) >= 0 &&
    (value[1] as number) < 1e9
  );
}

function hrDuration(start: HrTime, end: HrTime): HrTime {
  let seconds = end[0] - start[0];
  let nanos = end[1] - start[1];
  if (nanos < 0) {
    seconds -= 1;
    nanos += 1e9;
  }
  return [seconds, nanos];
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function optionalVersion(version: string | undefined): { version?: string } {
  return version === undefined ? {} : { version };
}
