// Why handler modules failed to load: one error per file, an aggregate for the daemon to print at start,
// and a separate error for a handlers directory that is missing or holds no modules at all.
import type { ErrorCode } from '../errors/catalogue.ts';

/** One handler module that could not be used; the message names the file and says what to change. */
export class HandlerLoadError extends Error {
  readonly code: ErrorCode = 'DFW_HANDLER_LOAD';
  /** Path of the module that failed (the directory joined with its name). */
  readonly file: string;

  constructor(file: string, message: string, options?: ErrorOptions) {
    super(`${file}: ${message}`, options);
    this.name = 'HandlerLoadError';
    this.file = file;
  }
}

/** Every handler module that failed, listed one per line. */
export class HandlerLoadErrors extends AggregateError {
  declare readonly errors: HandlerLoadError[];
  readonly code: ErrorCode = 'DFW_HANDLERS_LOAD';
  readonly dir: string;

  constructor(dir: string, errors: HandlerLoadError[]) {
    const noun = errors.length === 1 ? 'handler module' : 'handler modules';
    super(
      errors,
      `${errors.length} ${noun} in "${dir}" failed to load; fix them or move them out of the directory:\n` +
        errors.map((e) => `  - ${e.message}`).join('\n'),
    );
    this.name = 'HandlerLoadErrors';
    this.dir = dir;
  }
}

/** The handlers directory itself is unusable: missing, not a directory, or without a single handler module. */
export class HandlersDirectoryError extends Error {
  readonly code: ErrorCode = 'DFW_HANDLERS_DIR';
  readonly dir: string;

  constructor(dir: string, message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'HandlersDirectoryError';
    this.dir = dir;
  }
}
