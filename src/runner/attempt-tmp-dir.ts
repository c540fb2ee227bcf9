// `ctx.tmpDir`: a private folder per handler attempt (mode 0700), made on first read and removed once the
// attempt ended (returned, threw, timed out, aborted, crashed). The runner names it and removes it; whichever
// host runs the handler (inline, worker thread, child process) makes it, so an attempt that never reads
// `ctx.tmpDir` costs no file-system call but one check when it ends. A folder's name holds the pid of the
// process that named it, so the folders a killed daemon left (kill -9, an OOM kill) are swept by the next one.
import { randomUUID } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync } from 'node:fs';
import { lstat, readdir, rm } from 'node:fs/promises';
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

/** A fresh path for one attempt's folder, named for this process (`<prefix><pid>-<uuid>`); nothing is made yet. */
export function attemptTmpPath(): string {
  return join(tmpdir(), `${ATTEMPT_TMP_PREFIX}${process.pid}-${randomUUID()}`);
}

/** Folders named before names held a pid (`<prefix><uuid>`) are swept once they are this old. */
const UNOWNED_SWEEP_AGE_MS = 24 * 3_600_000;

export interface SweepOptions {
  logger: Logger;
  /** Where the folders are. Default: the OS temp folder (TMPDIR). */
  dir?: string;
  /** True while a process of that pid lives. Default: signal 0 (a process of another user counts as alive). */
  alive?: (pid: number) => boolean;
  /** When this process started (epoch ms): a folder of its own pid older than that is a former process's. */
  startedAt?: number;
  now?: number;
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Removes the attempt folders whose process is gone (a daemon killed mid-attempt cannot remove its own): named
 * for a pid no process holds, for this process's pid but older than it (a restarted container's pid 1), or of
 * the pid-less older form and a day old. Folders of live processes (another daemon on the host) are left.
 * Returns how many were removed; never rejects.
 */
export async function sweepAttemptTmpDirs(options: SweepOptions): Promise<number> {
  const { logger, dir = tmpdir(), alive = pidAlive, now = Date.now() } = options;
  const startedAt = options.startedAt ?? now - process.uptime() * 1_000;
  let names: string[];
  try {
    names = (await readdir(dir)).filter((name) => name.startsWith(ATTEMPT_TMP_PREFIX));
  } catch {
    return 0;
  }
  let removed = 0;
  for (const name of names) {
    const path = join(dir, name);
    const owner = /^(\d+)-/.exec(name.slice(ATTEMPT_TMP_PREFIX.length));
    try {
      const stat = await lstat(path);
      if (!stat.isDirectory()) continue;
      const pid = owner ? Number(owner[1]) : undefined;
      const stale =
        pid === undefined
          ? now - stat.mtimeMs > UNOWNED_SWEEP_AGE_MS
          : pid === process.pid
            ? stat.mtimeMs < startedAt
            : !alive(pid);
      if (!stale) continue;
      await rm(path, { recursive: true, force: true, maxRetries: 3 });
      removed++;
    } catch (error) {
      logger.warn(
        { code: 'DFW_HANDLER_TMPDIR', path, err: error as Error },
        'could not remove an attempt folder a former process left; remove it by hand',
      );
    }
  }
  if (removed > 0)
    logger.info({ removed, dir }, 'removed attempt folders (ctx.tmpDir) that ended processes left');
  return removed;
}

let swept: Promise<number> | undefined;

/** Sweeps once per process (see sweepAttemptTmpDirs), at its first attempt; later calls return the same sweep. */
export function sweepAttemptTmpDirsOnce(logger: Logger): Promise<number> {
  swept ??= sweepAttemptTmpDirs({ logger });
  return swept;
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
