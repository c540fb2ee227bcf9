// Turns a raw answer (status, headers, body text) into either parsed JSON or one ServiceError, whatever
// the body holds: the service's envelope, the `{message}`-only shape, a proxy's HTML page or nothing at all.
import { isPlainObject } from '../schema/plain-object.ts';
import { PreconditionFailedError, ResponseValidationError, ServiceError } from './errors.ts';
import type { ServiceErrorDetails } from './errors.ts';
import type { Operation } from './types.ts';

/** What came back over the wire, body read in full. */
export interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

const SNIPPET_LENGTH = 200;

/**
 * Milliseconds to wait from a `Retry-After` value: delay-seconds (`"7"`) or an HTTP date, which is measured
 * against `nowMs`. Undefined when absent or unreadable; never negative.
 */
export function parseRetryAfter(value: string | string[] | undefined, nowMs: number): number | undefined {
  const raw = (Array.isArray(value) ? value[0] : value)?.trim();
  if (raw === undefined || raw === '') return undefined;
  if (/^\d+(\.\d+)?$/.test(raw)) return Math.round(Number(raw) * 1000);
  const at = Date.parse(raw);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, at - nowMs);
}

function stringOrUndefined(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined;
}

/** The one ServiceError for a non-2xx answer; `redact` scrubs anything the body might echo back (the API key). */
export function toServiceError(
  operation: Operation,
  answer: Answer,
  redact: (text: string) => string,
  nowMs = Date.now(),
): ServiceError {
  const retryAfterMs = parseRetryAfter(answer.headers['retry-after'], nowMs);
  const body = tryParseJson(answer.text);
  if (isPlainObject(body)) {
    const code = stringOrUndefined(body.code);
    const message = stringOrUndefined(body.message);
    if (code !== undefined || message !== undefined) {
      return serviceErrorOf({
        operation,
        status: answer.status,
        code,
        retryAfterMs,
        serviceMessage: message === undefined ? undefined : redact(message),
      });
    }
  }
  const snippet = answer.text.slice(0, SNIPPET_LENGTH);
  return serviceErrorOf({
    operation,
    status: answer.status,
    retryAfterMs,
    bodySnippet: redact(snippet),
  });
}

/** The ServiceError subclass a caller can `instanceof` for this status, else ServiceError itself. */
export function serviceErrorOf(details: ServiceErrorDetails): ServiceError {
  return details.status === 412 ? new PreconditionFailedError(details) : new ServiceError(details);
}

function tryParseJson(text: string): unknown {
  if (text.trim() === '') return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

/** The JSON of a 2xx answer; an empty or non-JSON body is a ResponseValidationError. */
export function parseJsonBody(operation: Operation, answer: Answer): unknown {
  if (answer.text.trim() === '') {
    throw new ResponseValidationError(
      operation,
      '(body)',
      `${answer.status} has an empty body, expected JSON`,
    );
  }
  try {
    return JSON.parse(answer.text) as unknown;
  } catch {
    throw new ResponseValidationError(operation, '(body)', `${answer.status} is not JSON`);
  }
}
