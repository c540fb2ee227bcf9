// The one way a secret (the API key, the wake token, a password in a URL) is kept out of what df-worker writes:
// the one marker that stands in for it, the scrubbing of its raw and URL-encoded forms from text (a key sent as
// `api_key=` comes back encoded in an echoed URL) and from JSON-like values (what a handler returned, threw or
// logged), and the masking of a URL's credentials, query and fragment. Used by the logger, the configuration
// views, the service client, the runner and the sandbox.

/** What a secret is replaced with, in log lines, printed configurations and messages alike. */
export const REDACTED = '[redacted]';

export type Redact = (text: string) => string;

/** Replaces every occurrence of each non-empty secret in text, raw or URL-encoded, with REDACTED. */
export function redactor(secrets: readonly string[]): Redact {
  const forms = [...new Set(secrets.filter((s) => s.length > 0).flatMap((s) => [s, encodeURIComponent(s)]))];
  if (forms.length === 0) return (text) => text;
  return (text) => forms.reduce((out, form) => out.replaceAll(form, REDACTED), text);
}

/**
 * `text` with the parts of a URL that may hold a secret (user name and password, query, fragment) replaced by
 * REDACTED: `https://user:pw@host/?api_key=k` becomes `https://[redacted]@host/?[redacted]`. Text without a
 * host (not a URL, or `user:pw@host`, which parses as a scheme and a path) is masked from its first `?` or `#`
 * and up to its last `@`, since it may still be a mistyped URL with a secret in it.
 */
export function redactUrl(text: string): string {
  const url = URL.parse(text);
  if (url === null || url.host === '') return redactUrlText(text);
  const credentials = url.username !== '' || url.password !== '';
  // The user name would percent-encode the marker's brackets: a stand-in, swapped for the marker below.
  if (credentials) {
    url.username = 'x';
    url.password = '';
  }
  if (url.search !== '') url.search = REDACTED;
  if (url.hash !== '') url.hash = REDACTED;
  return credentials ? url.href.replace('//x@', `//${REDACTED}@`) : url.href;
}

function redactUrlText(text: string): string {
  const cut = text.search(/[?#]/);
  const head = cut < 0 ? text : text.slice(0, cut);
  const tail = cut < 0 ? '' : `${text[cut]}${REDACTED}`;
  const at = head.lastIndexOf('@');
  if (at < 0) return head + tail;
  const authority = head.indexOf('//');
  const start = authority >= 0 && authority < at ? authority + 2 : 0;
  return `${head.slice(0, start)}${REDACTED}${head.slice(at)}${tail}`;
}

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
