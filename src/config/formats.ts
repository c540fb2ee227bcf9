// Convict formats for df-worker settings: strict coercion of environment strings ("12abc" stays a string
// and fails, "no" is not `true`) and messages that read well after "DF_SETTING (setting): ".
import convict from 'convict';

/** Node's timers fire at once (with a warning) beyond this delay, so no millisecond setting may exceed it. */
export const MAX_TIMER_MS = 2_147_483_647;

/** Names under which the formats are registered in convict's (process-wide) format registry. */
export const FORMAT = {
  integer: 'df-integer',
  number: 'df-number',
  boolean: 'df-boolean',
  /** A boolean, or 'auto' for a choice made at run time (e.g. from whether stdout is a terminal). */
  booleanOrAuto: 'df-boolean-or-auto',
  string: 'df-string',
  oneOf: 'df-one-of',
  httpUrl: 'df-http-url',
  /** redis:// or rediss:// (may hold a password: shown only with it masked), or empty. */
  redisUrl: 'df-redis-url',
  timeZone: 'df-time-zone',
} as const;

/** Extra members a schema entry carries for the formats below; convict hands the entry to `validate`. */
export interface FormatBounds {
  min?: number;
  max?: number;
  values?: readonly string[];
  nonEmpty?: boolean;
}

/** The service's own path at the end of a base URL: `/v1`, `/v1/data-factory`, `/v2/data_factory/files`, ... */
const API_PATH_SUFFIX = /\/v\d+(?:\/data[-_]factory(?:\/(?:tasks|task[-_]executions|files))?)?\/*$/i;
const INTEGER_TEXT = /^[+-]?\d+$/;
const NUMBER_TEXT = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;
const TRUE_TEXT = new Set(['true', '1', 'yes', 'on']);
const FALSE_TEXT = new Set(['false', '0', 'no', 'off']);

// Coercion runs on strings only (environment, overrides); text that is not a number is left as it is so
// that validation reports exactly what the user wrote.
function coerceInteger(value: string): unknown {
  const text = value.trim();
  return INTEGER_TEXT.test(text) ? Number(text) : value;
}

function coerceNumber(value: string): unknown {
  const text = value.trim();
  return NUMBER_TEXT.test(text) ? Number(text) : value;
}

function coerceBoolean(value: string): unknown {
  const text = value.trim().toLowerCase();
  if (TRUE_TEXT.has(text)) return true;
  if (FALSE_TEXT.has(text)) return false;
  return value;
}

function coerceBooleanOrAuto(value: string): unknown {
  return value.trim().toLowerCase() === 'auto' ? 'auto' : coerceBoolean(value);
}

function rangeText(bounds: FormatBounds): string {
  const { min, max } = bounds;
  if (min !== undefined && max !== undefined) return `between ${min} and ${max}`;
  if (min !== undefined) return `of at least ${min}`;
  if (max !== undefined) return `of at most ${max}`;
  return '';
}

function assertInRange(value: unknown, bounds: FormatBounds, kind: 'an integer' | 'a number'): void {
  const ok =
    typeof value === 'number' &&
    (kind === 'an integer' ? Number.isSafeInteger(value) : Number.isFinite(value)) &&
    (bounds.min === undefined || value >= bounds.min) &&
    (bounds.max === undefined || value <= bounds.max);
  if (!ok) throw new Error(`must be ${kind} ${rangeText(bounds)}`.trimEnd());
}

function isValidTimeZone(value: string): boolean {
  // The default needs no Intl (touching its time zone data costs the daemon about 6 MB of resident memory).
  if (value === 'UTC') return true;
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: value });
    return true;
  } catch {
    return false;
  }
}

// Convict hands validators the whole schema entry; read back the members the helpers in schema.ts put there.
function boundsOf(schema: convict.SchemaObj): FormatBounds {
  const { min, max, values, nonEmpty } = schema as Record<string, unknown>;
  return {
    ...(typeof min === 'number' ? { min } : {}),
    ...(typeof max === 'number' ? { max } : {}),
    ...(Array.isArray(values) ? { values: values.map(String) } : {}),
    nonEmpty: nonEmpty === true,
  };
}

/** Describes the bounds of a setting for its `doc`, e.g. "An integer between 1 and 256". */
export function describeBounds(kind: 'integer' | 'number', bounds: FormatBounds): string {
  return `${kind === 'integer' ? 'An integer' : 'A number'} ${rangeText(bounds)}`.trimEnd();
}

convict.addFormats({
  [FORMAT.integer]: {
    validate: (value: unknown, schema: convict.SchemaObj) =>
      assertInRange(value, boundsOf(schema), 'an integer'),
    coerce: coerceInteger,
  },
  [FORMAT.number]: {
    validate: (value: unknown, schema: convict.SchemaObj) =>
      assertInRange(value, boundsOf(schema), 'a number'),
    coerce: coerceNumber,
  },
  [FORMAT.boolean]: {
    validate: (value: unknown) => {
      if (typeof value !== 'boolean') throw new Error('must be true or false');
    },
    coerce: coerceBoolean,
  },
  [FORMAT.booleanOrAuto]: {
    validate: (value: unknown) => {
      if (typeof value !== 'boolean' && value !== 'auto') throw new Error('must be auto, true or false');
    },
    coerce: coerceBooleanOrAuto,
  },
  [FORMAT.string]: {
    validate: (value: unknown, schema: convict.SchemaObj) => {
      if (typeof value !== 'string') throw new Error('must be a string');
      if (boundsOf(schema).nonEmpty === true && value.trim() === '') throw new Error('must not be empty');
    },
  },
  [FORMAT.oneOf]: {
    validate: (value: unknown, schema: convict.SchemaObj) => {
      const values = boundsOf(schema).values ?? [];
      if (typeof value !== 'string' || !values.includes(value)) {
        throw new Error(`must be one of ${values.join(', ')}`);
      }
    },
  },
  [FORMAT.httpUrl]: {
    validate: (value: unknown) => {
      if (typeof value !== 'string') throw new Error('must be a string');
      if (value === '') return; // not set: whether it is required depends on the command
      let url: URL;
      try {
        url = new URL(value);
      } catch {
        throw new Error('must be an absolute http:// or https:// URL');
      }
      if (url.protocol !== 'http:' && url.protocol !== 'https:') {
        throw new Error('must be an http:// or https:// URL');
      }
      // The API client refuses these too, but only once `start` runs; a secret in a URL also ends up in
      // logs and in `check --verbose`, so it is refused here where the setting is named.
      if (url.username !== '' || url.password !== '' || url.search !== '' || url.hash !== '') {
        throw new Error(
          "must be the service's base URL without a user name, password, query or fragment (put the API key in DF_API_KEY or DF_API_KEY_FILE)",
        );
      }
      // Refused rather than stripped: a URL that works only because df-worker rewrites it would fail in the
      // next tool given it, and a warning is easy to miss in a log. `check` names the fix before `start` runs.
      const versioned = API_PATH_SUFFIX.exec(url.pathname);
      if (versioned !== null) {
        const suffix = versioned[0].replace(/\/+$/, '');
        throw new Error(
          `must not end in ${suffix}, the service's API path, which df-worker adds itself (the service would ` +
            `answer 404 for a doubled path): drop it, as in ${url.origin}${url.pathname.slice(0, versioned.index)}`,
        );
      }
    },
  },
  [FORMAT.redisUrl]: {
    validate: (value: unknown) => {
      if (typeof value !== 'string') throw new Error('must be a string');
      if (value === '') return; // not set: standalone mode
      const url = URL.parse(value);
      if (url === null || (url.protocol !== 'redis:' && url.protocol !== 'rediss:') || url.host === '') {
        throw new Error('must be a redis:// or rediss:// URL such as redis://:password@redis:6379/0');
      }
    },
  },
  [FORMAT.timeZone]: {
    validate: (value: unknown) => {
      if (typeof value !== 'string' || !isValidTimeZone(value)) {
        throw new Error('must be an IANA time zone such as UTC or Europe/Paris');
      }
    },
  },
});
