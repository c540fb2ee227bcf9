// Crash-safe file primitives: a reader after kill -9 at any instant sees either the previous content or
// the new one, never a mix. Used by the journal and by any module that keeps state across restarts.
import { open, readFile, rename, unlink } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { isErrorCode, type ErrorCode } from '../errors/catalogue.ts';

// Not an ESM import: its namespace would read node:crypto's lazy webcrypto (see telemetry/http-server.ts).
const { randomBytes } = process.getBuiltinModule('node:crypto');

export interface WriteDurablyOptions {
  /** Permission bits of a newly written file (before umask). Default 0o600: state may hold task inputs. */
  mode?: number;
}

/** A file that exists but does not hold valid JSON. */
export class JsonFileError extends Error {
  readonly code: ErrorCode = 'DFW_STATE_FILE_INVALID';
  readonly path: string;
  override readonly cause: Error;

  constructor(path: string, cause: Error) {
    super(`${path} does not hold valid JSON (${cause.message}); move it away or fix it by hand`);
    this.name = 'JsonFileError';
    this.path = path;
    this.cause = cause;
  }
}

/** Error codes of platforms (or file systems) where a folder cannot be opened or fsynced. */
const UNSUPPORTED_DIRECTORY_SYNC = new Set(['EISDIR', 'EINVAL', 'EPERM']);

/** Names the temp file after the target so a leftover is recognisable: `.<name>.<pid>.<random>.tmp`. */
export function temporaryFileName(target: string): string {
  return `.${basename(target)}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`;
}

/** True for a file name that writeFileDurably uses while writing (a leftover means a write was interrupted). */
export function isTemporaryFileName(name: string): boolean {
  return name.startsWith('.') && name.endsWith('.tmp');
}

/**
 * Replaces `path` with `data` atomically and durably: temp file in the same folder, fsync, rename over the
 * target, fsync the folder so the rename itself survives a power cut. The temp file is removed on failure.
 */
export async function writeFileDurably(
  path: string,
  data: string | Uint8Array,
  options: WriteDurablyOptions = {},
): Promise<void> {
  const folder = dirname(path);
  const temporary = join(folder, temporaryFileName(path));
  let created = false;
  try {
    const handle = await open(temporary, 'wx', options.mode ?? 0o600);
    created = true;
    try {
      await handle.writeFile(data);
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(temporary, path);
    created = false;
  } catch (error) {
    if (created) await unlink(temporary).catch(() => undefined);
    throw error;
  }
  await syncDirectory(folder);
}

/** Parsed JSON content of `path`, or undefined when the file does not exist; JsonFileError when unparsable. */
export async function readJsonFile(path: string): Promise<unknown> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    if (errorCode(error) === 'ENOENT') return undefined;
    throw error;
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    throw new JsonFileError(path, error as Error);
  }
}

/** Removes `path` and makes the removal durable; a file that is already gone is fine. */
export async function removeDurably(path: string): Promise<void> {
  try {
    await unlink(path);
  } catch (error) {
    if (errorCode(error) !== 'ENOENT') throw error;
  }
  try {
    await syncDirectory(dirname(path));
  } catch (error) {
    // A missing folder cannot hold the file either: the removal holds.
    if (errorCode(error) !== 'ENOENT') throw error;
  }
}

/** Flushes a folder's entries (creations, renames, removals) to disk where the platform allows it. */
export async function syncDirectory(folder: string): Promise<void> {
  let handle;
  try {
    handle = await open(folder, 'r');
    await handle.sync();
  } catch (error) {
    if (!UNSUPPORTED_DIRECTORY_SYNC.has(errorCode(error) ?? '')) throw error;
  } finally {
    await handle?.close();
  }
}

/**
 * The `code` of a Node.js system error (ENOENT, EROFS...), if any; undefined for df-worker's own errors, whose
 * `DFW_*` code says nothing about the file system.
 */
export function errorCode(error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null || !('code' in error)) return undefined;
  return typeof error.code === 'string' && !isErrorCode(error.code) ? error.code : undefined;
}
