// A tiny OTLP/HTTP collector for the tests: accepts POST /v1/traces with the JSON encoding the http exporter
// sends, keeps each raw body and the spans it holds, flattened with their resource's attributes.
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string | undefined;
  name: string;
  kind: number;
  startMs: number;
  endMs: number;
  attributes: Record<string, unknown>;
  events: { name: string; attributes: Record<string, unknown> }[];
  status: { code: number; message?: string };
  resource: Record<string, unknown>;
}

interface OtlpValue {
  stringValue?: string;
  intValue?: number | string;
  doubleValue?: number;
  boolValue?: boolean;
  arrayValue?: { values?: OtlpValue[] };
}

type OtlpAttributes = { key: string; value: OtlpValue }[] | undefined;

export class OtlpReceiver {
  readonly bodies: string[] = [];
  readonly spans: ReceivedSpan[] = [];
  readonly #server: http.Server;
  url = '';
  /** What POST /v1/traces answers; bodies are kept only when it is 200 (a collector down or refusing). */
  status = 200;

  constructor() {
    this.#server = http.createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.on('end', () => {
        if (request.method !== 'POST' || request.url !== '/v1/traces') {
          response.writeHead(404).end();
          return;
        }
        if (this.status !== 200) {
          response.writeHead(this.status).end();
          return;
        }
        const body = Buffer.concat(chunks).toString('utf8');
        this.bodies.push(body);
        this.spans.push(...parseTraces(body));
        response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      });
    });
  }

  async listen(): Promise<string> {
    await new Promise<void>((resolve) => this.#server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
    return this.url;
  }

  async close(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}

export function parseTraces(body: string): ReceivedSpan[] {
  const parsed = JSON.parse(body) as {
    resourceSpans?: {
      resource?: { attributes?: OtlpAttributes };
      scopeSpans?: {
        spans?: {
          traceId: string;
          spanId: string;
          parentSpanId?: string;
          name: string;
          kind: number;
          startTimeUnixNano: string | number;
          endTimeUnixNano: string | number;
          attributes?: OtlpAttributes;
          events?: { name: string; attributes?: OtlpAttributes }[];
          status?: { code?: number; message?: string };
        }[];
      }[];
    }[];
  };
  const out: ReceivedSpan[] = [];
  for (const resourceSpans of parsed.resourceSpans ?? []) {
    const resource = attributes(resourceSpans.resource?.attributes);
    for (const scope of resourceSpans.scopeSpans ?? []) {
      for (const span of scope.spans ?? []) {
        out.push({
          traceId: span.traceId,
          spanId: span.spanId,
          parentSpanId: span.parentSpanId === '' ? undefined : span.parentSpanId,
          name: span.name,
          kind: span.kind,
          startMs: Number(BigInt(span.startTimeUnixNano) / 1000n) / 1000,
          endMs: Number(BigInt(span.endTimeUnixNano) / 1000n) / 1000,
          attributes: attributes(span.attributes),
          events: (span.events ?? []).map((e) => ({ name: e.name, attributes: attributes(e.attributes) })),
          status: {
            code: span.status?.code ?? 0,
            ...(span.status?.message ? { message: span.status.message } : {}),
          },
          resource,
        });
      }
    }
  }
  return out;
}

function attributes(list: OtlpAttributes): Record<string, unknown> {
  return Object.fromEntries((list ?? []).map(({ key, value }) => [key, valueOf(value)]));
}

function valueOf(value: OtlpValue): unknown {
  if (value.stringValue !== undefined) return value.stringValue;
  if (value.intValue !== undefined) return Number(value.intValue);
  if (value.doubleValue !== undefined) return value.doubleValue;
  if (value.boolValue !== undefined) return value.boolValue;
  if (value.arrayValue !== undefined) return (value.arrayValue.values ?? []).map(valueOf);
  return undefined;
}

/** The spans of one trace as an indented tree (name and duration), for a failing assertion's message. */
export function drawTree(spans: ReceivedSpan[]): string {
  const children = new Map<string | undefined, ReceivedSpan[]>();
  const ids = new Set(spans.map((s) => s.spanId));
  for (const span of spans) {
    const parent =
      span.parentSpanId !== undefined && ids.has(span.parentSpanId) ? span.parentSpanId : undefined;
    children.set(parent, [...(children.get(parent) ?? []), span]);
  }
  const lines: string[] = [];
  const walk = (parent: string | undefined, depth: number) => {
    for (const span of (children.get(parent) ?? []).sort((a, b) => a.startMs - b.startMs)) {
      lines.push(`${'  '.repeat(depth)}${span.name} ${(span.endMs - span.startMs).toFixed(1)} ms`);
      walk(span.spanId, depth + 1);
    }
  };
  walk(undefined, 0);
  return lines.join('\n');
}
