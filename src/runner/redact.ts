// Cleans secret values (the API key, the wake token) out of what a handler returned, threw or logged, before
// the daemon logs or reports it: handler code can read them in ways no environment scrubbing stops.
// Scrubbing text itself is errors/redact.ts's: one marker and one way for the whole daemon.
import type { Redact } from '../errors/redact.ts';

export { redactor, type Redact } from '../errors/redact.ts';

/**
 * A copy of a JSON-like value with `redact` applied to every string, object keys included. Values that are not
 * plain data (class instances, functions) are kept as they are: callers pass what came off a wire or out of
 * `checkOutput`, which is plain data.
 */
export function redactDeep<T>(value: T, redact: Redact): T {
  return walk(value, redact, 0) as T;
}

const MAX_DEPTH = 64;

function walk(value: unknown, redact: Redact, depth: number): unknown {
  if (typeof value === 'string') return redact(value);
  if (typeof value !== 'object' || value === null || depth > MAX_DEPTH) return value;
  if (Array.isArray(value)) return value.map((item) => walk(item, redact, depth + 1));
  const proto = Object.getPrototypeOf(value) as unknown;
  if (proto !== Object.prototype && proto !== null) return value;
  const copy: Record<string, unknown> = {};
  for (const [key, member] of Object.entries(value)) {
    // defineProperty keeps a "__proto__" member a member, as checkOutput does.
    Object.defineProperty(copy, redact(key), {
      value: walk(member, redact, depth + 1),
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return copy;
}
