// HTML built from template literals where every interpolated value is escaped unless it is already HTML: user
// data (execution inputs and outputs, log lines, variable values) can only ever show as text.

/** Text already escaped or built by `html`: interpolated as it is. */
export class SafeHtml {
  readonly text: string;
  constructor(text: string) {
    this.text = text;
  }
  toString(): string {
    return this.text;
  }
}

const ENTITIES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};

/** Escapes the five characters that matter in element content and in quoted attribute values. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ENTITIES[c]!);
}

/**
 * Builds HTML: each value is escaped, except SafeHtml (kept) and arrays (each item by the same rule, joined).
 * undefined, null and false render nothing, so `${cond && html`...`}` reads naturally.
 */
export function html(strings: TemplateStringsArray, ...values: unknown[]): SafeHtml {
  let out = strings[0]!;
  values.forEach((value, i) => {
    out += render(value) + strings[i + 1]!;
  });
  return new SafeHtml(out);
}

function render(value: unknown): string {
  if (value === undefined || value === null || value === false) return '';
  if (value instanceof SafeHtml) return value.text;
  if (Array.isArray(value)) return value.map(render).join('');
  return escapeHtml(typeof value === 'string' ? value : (JSON.stringify(value) ?? ''));
}

/** Trusted markup made elsewhere (the server-drawn SVG chart, which escapes its own text). */
export function trusted(text: string): SafeHtml {
  return new SafeHtml(text);
}

/** A JSON value, indented, as text for a <pre>. */
export function prettyJson(value: unknown): string {
  return JSON.stringify(value, null, 2) ?? 'undefined';
}

/** A date or instant as `HH:MM:SS.mmm` UTC (the day when it is not today's), for dense tables. */
export function shortTime(at: string | number | undefined, nowMs = Date.now()): string {
  if (at === undefined) return '';
  const date = new Date(at);
  if (Number.isNaN(date.getTime())) return String(at);
  const iso = date.toISOString();
  const sameDay = iso.slice(0, 10) === new Date(nowMs).toISOString().slice(0, 10);
  return sameDay ? iso.slice(11, 23) : `${iso.slice(0, 10)} ${iso.slice(11, 19)}`;
}
