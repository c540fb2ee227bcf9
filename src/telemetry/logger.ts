// The daemon's structured logger: pino JSON lines with ISO timestamps, and the API key and wake token
// redacted wherever they are known to travel (config objects, request headers).
import { pino } from 'pino';

export type Logger = pino.Logger;

export interface LoggerOptions {
  /** pino level: fatal, error, warn, info, debug, trace or silent. */
  level: string;
  /** Human-readable output; needs pino-pretty, which df-worker does not ship, so logs stay JSON. Default: false. */
  pretty?: boolean;
  /** Where the JSON lines go. Default: stdout. */
  destination?: pino.DestinationStream;
}

export const REDACTED = '[redacted]';

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
];

export function createLogger(options: LoggerOptions): Logger {
  const settings: pino.LoggerOptions = {
    level: options.level,
    base: { name: 'df-worker' },
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: { paths: REDACTED_PATHS, censor: REDACTED },
    serializers: { err: pino.stdSerializers.err },
  };
  const logger = options.destination === undefined ? pino(settings) : pino(settings, options.destination);
  if (options.pretty === true) {
    logger.debug('log.pretty is set but pino-pretty is not installed; writing JSON lines');
  }
  return logger;
}
