// The formats of df-worker settings: strict coercion of strings ("12abc" stays a string and fails, "no" is
// not `true`) and a valibot schema per format whose messages read well after "DF_SETTING (setting): ".
import * as v from 'valibot';

/** Node's timers fire at once (with a warning) beyond this delay, so no millisecond setting may exceed it. */
export const MAX_TIMER_MS = 2_147_483_647;

/** The format of each setting, named in the schema (`format: FORMAT.integer`). */
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
  /** host:port[,host:port...] (the port may be left out where the setting has a usual one), or empty. */
  hostPortList: 'df-host-port-list',
  timeZone: 'df-time-zone',
} as const;

/** Extra members a schema entry carries for the formats below. */
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

// Coercion runs on strings only (environment, files, overrides); text that is not a number is left as it is
// so that validation reports exactly what the user wrote.
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

function inRange(value: number, bounds: FormatBounds): boolean {
  return (
    (bounds.min === undefined || value >= bounds.min) && (bounds.max === undefined || value <= bounds.max)
  );
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

/** Describes the bounds of a setting for its `doc`, e.g. "An integer between 1 and 256". */
export function describeBounds(kind: 'integer' | 'number', bounds: FormatBounds): string {
  return `${kind === 'integer' ? 'An integer' : 'A number'} ${rangeText(bounds)}`.trimEnd();
}

/** The problem with a base URL for the service, or undefined when it is usable (or not set). */
function httpUrlProblem(value: string): string | undefined {
  if (value === '') return undefined; // not set: whether it is required depends on the command
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return 'must be an absolute http:// or https:// URL';
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return 'must be an http:// or https:// URL';
  // The API client refuses these too, but only once `start` runs; a secret in a URL also ends up in
  // logs and in `check --verbose`, so it is refused here where the setting is named.
  if (url.username !== '' || url.password !== '' || url.search !== '' || url.hash !== '') {
    return "must be the service's base URL without a user name, password, query or fragment (put the API key in DF_API_KEY or DF_API_KEY_FILE)";
  }
  // Refused rather than stripped: a URL that works only because df-worker rewrites it would fail in the
  // next tool given it, and a warning is easy to miss in a log. `check` names the fix before `start` runs.
  const versioned = API_PATH_SUFFIX.exec(url.pathname);
  if (versioned === null) return undefined;
  const suffix = versioned[0].replace(/\/+$/, '');
  return (
    `must not end in ${suffix}, the service's API path, which df-worker adds itself (the service would ` +
    `answer 404 for a doubled path): drop it, as in ${url.origin}${url.pathname.slice(0, versioned.index)}`
  );
}

/** The problem with a Redis URL (clustered mode), or undefined when it is usable (or not set). */
function redisUrlProblem(value: string): string | undefined {
  if (value === '') return undefined; // not set: standalone mode
  const url = URL.parse(value);
  if (url === null || (url.protocol !== 'redis:' && url.protocol !== 'rediss:') || url.host === '') {
    return 'must be a redis:// or rediss:// URL such as redis://:password@redis:6379/0';
  }
  return undefined;
}

/** `host:port` pairs of a list such as `a:26379,b:26379` (port undefined when left out), or the problem. */
export function parseHostPortList(
  value: string,
): { host: string; port: number | undefined }[] | { problem: string } {
  const entries = value.split(',').map((entry) => entry.trim());
  if (value.trim() === '') return [];
  const parsed: { host: string; port: number | undefined }[] = [];
  for (const entry of entries) {
    const match = /^(\[[0-9a-fA-F:.]+\]|[^\s:[\]/@]+)(?::(\d{1,5}))?$/.exec(entry);
    const port = match?.[2] === undefined ? undefined : Number(match[2]);
    if (match === null || (port !== undefined && (port < 1 || port > 65_535))) {
      return {
        problem: `must be a comma-separated list of host:port such as sentinel-0:26379,sentinel-1:26379; "${entry}" is not one`,
      };
    }
    parsed.push({ host: match[1]!.replace(/^\[(.*)\]$/, '$1'), port });
  }
  return parsed;
}

/** The schema a value of `format` must match; its issue's message is the problem, e.g. "must be true or false". */
export function formatSchema(format: string, bounds: FormatBounds): v.GenericSchema {
  switch (format) {
    case FORMAT.integer:
    case FORMAT.number: {
      const integer = format === FORMAT.integer;
      const message = `must be ${integer ? 'an integer' : 'a number'} ${rangeText(bounds)}`.trimEnd();
      const valid = (value: number) =>
        (integer ? Number.isSafeInteger(value) : Number.isFinite(value)) && inRange(value, bounds);
      return v.pipe(v.number(message), v.check(valid, message));
    }
    case FORMAT.boolean:
      return v.boolean('must be true or false');
    case FORMAT.booleanOrAuto:
      return v.union([v.boolean(), v.literal('auto')], 'must be auto, true or false');
    case FORMAT.string:
      return v.pipe(
        v.string('must be a string'),
        v.check((value) => bounds.nonEmpty !== true || value.trim() !== '', 'must not be empty'),
      );
    case FORMAT.oneOf: {
      const values = bounds.values ?? [];
      return v.picklist(values, `must be one of ${values.join(', ')}`);
    }
    case FORMAT.httpUrl:
      return urlSchema(httpUrlProblem);
    case FORMAT.redisUrl:
      return urlSchema(redisUrlProblem);
    case FORMAT.hostPortList:
      return urlSchema((value) => {
        const parsed = parseHostPortList(value);
        return 'problem' in parsed ? parsed.problem : undefined;
      });
    case FORMAT.timeZone:
      return v.custom(
        (value) => typeof value === 'string' && isValidTimeZone(value),
        'must be an IANA time zone such as UTC or Europe/Paris',
      );
    default:
      throw new Error(`unknown setting format ${format}`);
  }
}

const COERCE: Partial<Record<string, (text: string) => unknown>> = {
  [FORMAT.integer]: coerceInteger,
  [FORMAT.number]: coerceNumber,
  [FORMAT.boolean]: coerceBoolean,
  [FORMAT.booleanOrAuto]: coerceBooleanOrAuto,
};

/** A value given for a setting of `format`: text (environment, file, option) becomes the number or boolean it spells. */
export function coerce(format: string, value: unknown): unknown {
  const coerceText = COERCE[format];
  return typeof value === 'string' && coerceText !== undefined ? coerceText(value) : value;
}

/** A URL setting: a string, and `problemOf` its message when the URL is not one the setting takes. */
function urlSchema(problemOf: (url: string) => string | undefined) {
  return v.pipe(
    v.string('must be a string'),
    v.rawCheck<string>(({ dataset, addIssue }) => {
      const problem = dataset.typed ? problemOf(dataset.value) : undefined;
      if (problem !== undefined) addIssue({ message: problem });
    }),
  );
}
