// `ctx.tmpDir`: a private folder per handler attempt (mode 0700), made on first read and removed once the
// attempt ended (returned, threw, timed out, aborted, crashed). The runner names it and removes it; whichever
// host runs the handler (inline, worker thread, child process) makes it, so an attempt that never reads
// `ctx.tmpDir` costs no file-system call but one check when it ends.
import { randomUUID } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { ErrorCode } from '../errors/catalogue.ts';

/** Every attempt folder's name starts so (under the OS temp folder, TMPDIR), to be found and cleared by hand. */
export const ATTEMPT_TMP_PREFIX = 'df-worker-attempt-';

/** `ctx.tmpDir` could not be made (TMPDIR missing or not writable, disk full): the attempt fails and is retried. */
export class AttemptTmpDirError extends Error {
  readonly code: ErrorCode = 'DFW_HANDLER_TMPDIR';
  readonly path: string;

  constructor(path: string, cause: unknown) {
    const reason = cause instanceof Error ? cause.message : String(cause);
    super(
      `could not make the attempt's private folder ctx.tmpDir at "${path}" (${reason}); ` +
        'make the temp folder (TMPDIR) writable and give it room',
      { cause },
    );
    this.name = 'AttemptTmpDirError';
    this.path = path;
  }
}

/** A fresh path for one attempt's folder; nothing is made yet. */
export function attemptTmpPath(): string {
  return join(tmpdir(), `${ATTEMPT_TMP_PREFIX}${randomUUID()}`);
}

/**
 * `ctx` with `tmpDir` defined on it: the first read makes the folder at `path` (0700, whatever the umask) and
 * every read returns `path`. Once `ended()` holds, a read makes nothing (the runner removes the folder then,
 * and a handler left running past its attempt must not bring it back).
 */
export function withTmpDir<T extends object>(
  ctx: T,
  path: string,
  ended: () => boolean,
): T & { readonly tmpDir: string } {
  let made = false;
  Object.defineProperty(ctx, 'tmpDir', {
    enumerable: true,
    get(): string {
      if (made || ended()) return path;
      try {
        // Fails if anything is at the path already: the folder is the attempt's alone.
        mkdirSync(path, { mode: 0o700 });
        chmodSync(path, 0o700);
      } catch (error) {
        throw new AttemptTmpDirError(path, error);
      }
      made = true;
      return path;
    },
  });
  return ctx as T & { readonly tmpDir: string };
}

/** Removes an attempt's folder and everything in it, if it was made. Never rejects: a failure is logged. */
export async function removeAttemptTmpDir(path: string, logger: Logger): Promise<void> {
  if (!existsSync(path)) return;
  try {
    await rm(path, { recursive: true, force: true, maxRetries: 3 });
  } catch (error) {
    logger.warn(
      { code: 'DFW_HANDLER_TMPDIR', path, err: error as Error },
      "could not remove the attempt's ctx.tmpDir; remove it by hand",
    );
  }
}
