// The daemon's structured logger: pino JSON lines with ISO timestamps (or, on a terminal, pino-pretty's
// readable lines), and the API key, wake token and sentinel password redacted wherever they are known to travel (config objects,
// request headers).
import { createRequire } from 'node:module';
import { pino } from 'pino';
import type PinoPretty from 'pino-pretty';
import { errorCodeOf } from '../errors/catalogue.ts';
import { REDACTED } from '../secrets/redact.ts';

export type Logger = pino.Logger;

/** When log lines are human-readable: always, never, or when their destination is a terminal. */
export type PrettyMode = boolean | 'auto';

export interface LoggerOptions {
  /** pino level: fatal, error, warn, info, debug, trace or silent. */
  level: string;
  /**
   * Readable lines (pino-pretty, formatted on the calling thread) instead of JSON lines. 'auto': readable when
   * the destination is a terminal (a TTY), JSON otherwise (containers, files, pipes). Default: false.
   */
  pretty?: PrettyMode;
  /** Where the lines go. Default: stdout. */
  destination?: pino.DestinationStream | NodeJS.WritableStream;
  /**
   * A second destination that gets every JSON line at `tee.level` or above, whatever `level` lets through to
   * `destination` (df-worker dev's console keeps each attempt's lines this way). Default: none.
   */
  tee?: { level: string; stream: pino.DestinationStream };
  /**
   * Fields added to every line (pino's mixin): with tracing on, the active span's `trace_id` and `span_id`.
   * Default: none, and no call per line.
   */
  mixin?: () => Record<string, unknown>;
}

// Specific paths only: a bare `key` would hide harmless fields such as an idempotency or task key.
export const REDACTED_PATHS = [
  'apiKey',
  '*.apiKey',
  'api.key',
  'config.api.key',
  'headers["x-api-key"]',
  'headers.authorization',
  '*.headers["x-api-key"]',
  '*.headers.authorization',
  'wakeToken',
  '*.wakeToken',
  'config.http.wakeToken',
  'sentinelPassword',
  '*.sentinelPassword',
  'config.cluster.sentinelPassword',
];

export function createLogger(options: LoggerOptions): Logger {
  const settings: pino.LoggerOptions = {
    level: options.level,
    base: { name: 'df-worker' },
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: { paths: REDACTED_PATHS, censor: REDACTED },
    serializers: { err: serializeError },
    ...(options.mixin ? { mixin: options.mixin } : {}),
  };
  const destination = options.destination ?? process.stdout;
  const pretty = wantsPretty(options.pretty ?? false, destination);
  if (options.tee) {
    const { tee } = options;
    const main = pretty ? prettyStream(destination) : destination;
    const streams: pino.StreamEntry[] = [{ level: tee.level as pino.Level, stream: tee.stream }];
    if (options.level !== 'silent') streams.push({ level: options.level as pino.Level, stream: main });
    const lowest =
      options.level === 'silent' || levelValue(tee.level) < levelValue(options.level)
        ? tee.level
        : options.level;
    return pino({ ...settings, level: lowest }, pino.multistream(streams));
  }
  if (pretty) return pino(settings, prettyStream(destination));
  return options.destination === undefined ? pino(settings) : pino(settings, options.destination);
}

function levelValue(level: string): number {
  return pino.levels.values[level] ?? Infinity;
}

/**
 * pino's own serializer (message, stack, cause and every enumerable member, `code` among them), plus the
 * catalogue's code for an error that carries none of its own, so every log line of a df-worker error names it.
 */
export function serializeError(error: Error): ReturnType<typeof pino.stdSerializers.err> {
  const serialized = pino.stdSerializers.err(error);
  if (serialized.code === undefined) {
    const code = errorCodeOf(error);
    if (code !== undefined) serialized.code = code;
  }
  return serialized;
}

/** Whether `mode` makes the lines written to `destination` readable rather than JSON. */
export function wantsPretty(mode: PrettyMode, destination: object): boolean {
  if (mode !== 'auto') return mode;
  return (destination as { isTTY?: boolean }).isTTY === true;
}

/**
 * Each JSON line pino writes, formatted by pino-pretty on this thread as it is written (no worker transport: one
 * thread fewer, and nothing queued to lose at process.exit). Loaded only here, so JSON logging never pays for it.
 */
function prettyStream(destination: pino.DestinationStream | NodeJS.WritableStream): pino.DestinationStream {
  const { prettyFactory } = createRequire(import.meta.url)('pino-pretty') as typeof PinoPretty;
  const format = prettyFactory({
    colorize: (destination as { isTTY?: boolean }).isTTY === true && process.env.NO_COLOR === undefined,
    translateTime: 'SYS:HH:MM:ss.l',
    ignore: 'pid,hostname,name',
    singleLine: true,
    // Only a real Error (under err) gets lines of its own, for its stack; `error` holds a summary string.
    errorLikeObjectKeys: ['err'],
  });
  return { write: (line: string) => void destination.write(format(line)) };
}
