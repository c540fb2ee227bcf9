// The one way a secret (the API key, the wake token) is kept out of text df-worker writes: the marker that
// stands in for it, and the scrubbing of its raw and URL-encoded forms (a key sent as `api_key=` comes back
// encoded in an echoed URL). Used by the logger, the configuration views, the service client and the runner.

/** What a secret is replaced with, in log lines, printed configurations and messages alike. */
export const REDACTED = '[redacted]';

export type Redact = (text: string) => string;

/** Replaces every occurrence of each non-empty secret in text, raw or URL-encoded, with REDACTED. */
export function redactor(secrets: readonly string[]): Redact {
  const forms = [...new Set(secrets.filter((s) => s.length > 0).flatMap((s) => [s, encodeURIComponent(s)]))];
  if (forms.length === 0) return (text) => text;
  return (text) => forms.reduce((out, form) => out.replaceAll(form, REDACTED), text);
}
