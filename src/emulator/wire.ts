// What crosses the wire: request bodies in (bounded), answers out (JSON, error envelopes, raw text).
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RequestRefusedError } from '../security/request-guard.ts';

export interface Answer {
  status: number;
  headers: Record<string, string>;
  body?: string;
}

export function jsonAnswer(status: number, value: unknown, headers: Record<string, string> = {}): Answer {
  return { status, headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(value) };
}

/** The error envelope of service API part 7. */
export function errorAnswer(
  status: number,
  code: string,
  message: string,
  nowMs: number,
  headers: Record<string, string> = {},
): Answer {
  return jsonAnswer(
    status,
    { date: new Date(nowMs).toISOString(), code, message, httpStatusCode: status },
    headers,
  );
}

/** The other error shape the service uses for some 400s and for 413: only `message`. */
export function messageAnswer(status: number, message: string): Answer {
  return jsonAnswer(status, { message });
}

export function emptyAnswer(status: number): Answer {
  return { status, headers: {} };
}

export interface RequestBody {
  bytes: Buffer;
  /** Whole size as received, even past the limit. */
  size: number;
  tooLarge: boolean;
}

/** Reads the whole body but keeps at most `limitBytes`, so an oversized upload cannot exhaust memory. */
export async function readBody(request: IncomingMessage, limitBytes: number): Promise<RequestBody> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size <= limitBytes) chunks.push(chunk);
  }
  const tooLarge = size > limitBytes;
  return { bytes: tooLarge ? Buffer.alloc(0) : Buffer.concat(chunks), size, tooLarge };
}

export type ParsedJson = { ok: true; value: unknown } | { ok: false };

/** An empty body parses as `{}`: clients omit bodies they have nothing to say in. */
export function parseJson(bytes: Buffer): ParsedJson {
  const text = bytes.toString('utf8');
  if (text.trim() === '') return { ok: true, value: {} };
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch {
    return { ok: false };
  }
}

/** Writes the answer unless the client or `close()` already destroyed the connection. */
export function writeAnswer(response: ServerResponse, answer: Answer): boolean {
  if (response.destroyed || response.socket?.destroyed) return false;
  response.writeHead(answer.status, answer.headers);
  response.end(answer.body);
  return true;
}

/** The answer to a request refused before any route (a foreign Host, a cross-site request, a body not JSON). */
export function refusalAnswer(refused: RequestRefusedError): Answer {
  return jsonAnswer(refused.status, refused.toJSON(), { 'cache-control': 'no-store' });
}
