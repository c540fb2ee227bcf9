// The file by which `df-worker dev --enqueue` (or a script) finds the running dev session: the emulator's URL,
// its API key and admin token, the worker's URL. In the state folder, readable by its owner only; removed when
// the session ends, and recognised as stale when the process that wrote it is gone.
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import * as v from 'valibot';
import type { ErrorCode } from '../../errors/catalogue.ts';
import { cliCommand } from '../invocation.ts';

/** Name of the session file in the state folder (DF_STATE_DIR, default ./.state). */
export const SESSION_FILE_NAME = 'dev-session.json';

export interface DevSession {
  /** Process id of `df-worker dev`. */
  pid: number;
  /** The emulator's base URL, e.g. `http://127.0.0.1:41234`. */
  url: string;
  /** The API key the emulator accepts (the worker's). */
  apiKey: string;
  /** Bearer token of the emulator's admin routes (`/__admin/...`). */
  adminToken: string;
  /** The worker's own endpoints: /metrics, /readyz, POST /wake. */
  workerUrl: string;
  /** The handlers folder, absolute. */
  handlersDir: string;
  /** ISO 8601. */
  startedAt: string;
}

/** No session file, or one whose process is gone; the message says which and what to do. */
export class NoDevSessionError extends Error {
  readonly code: ErrorCode = 'DFW_CLI_NO_DEV_SESSION';

  constructor(message: string) {
    super(message);
    this.name = 'NoDevSessionError';
  }
}

export function sessionFilePath(stateDir: string): string {
  return path.resolve(stateDir, SESSION_FILE_NAME);
}

export async function writeSessionFile(stateDir: string, session: DevSession): Promise<string> {
  const file = sessionFilePath(stateDir);
  await mkdir(path.dirname(file), { recursive: true });
  const temp = `${file}.${process.pid}.tmp`;
  await writeFile(temp, `${JSON.stringify(session, null, 2)}\n`, { mode: 0o600 });
  await rename(temp, file);
  return file;
}

/** Removes the session file if it is still this process's (a later session may have replaced it). */
export async function removeSessionFile(stateDir: string, pid = process.pid): Promise<void> {
  const file = sessionFilePath(stateDir);
  const current = await readSession(file).catch(() => undefined);
  if (current?.pid === pid) await rm(file, { force: true });
}

/** The running session of this state folder, or undefined when there is none (a stale file is ignored). */
export async function findLiveSession(stateDir: string): Promise<DevSession | undefined> {
  try {
    return await readLiveSession(stateDir);
  } catch (error) {
    if (error instanceof NoDevSessionError) return undefined;
    throw error;
  }
}

/** The running session of this state folder; throws NoDevSessionError when there is none. */
export async function readLiveSession(stateDir: string): Promise<DevSession> {
  const file = sessionFilePath(stateDir);
  let session: DevSession;
  try {
    session = await readSession(file);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') {
      throw new NoDevSessionError(
        `no dev session found: ${file} does not exist; start one with \`${cliCommand('dev')}\` in this folder ` +
          '(or point DF_STATE_DIR / --state-dir at the state folder of the one running)',
      );
    }
    throw new NoDevSessionError(`the session file ${file} cannot be read: ${(error as Error).message}`);
  }
  if (!isAlive(session.pid)) {
    throw new NoDevSessionError(
      `no dev session is running: ${file} was left by process ${session.pid}, which is gone; start one ` +
        `with \`${cliCommand('dev')}\``,
    );
  }
  return session;
}

async function readSession(file: string): Promise<DevSession> {
  const value = JSON.parse(await readFile(file, 'utf8')) as unknown;
  if (!v.is(SESSION, value)) throw new Error('it does not hold a dev session (pid, url, adminToken)');
  return value;
}

const SESSION = v.object({
  pid: v.pipe(v.number(), v.integer()),
  url: v.string(),
  apiKey: v.string(),
  adminToken: v.string(),
  workerUrl: v.string(),
  handlersDir: v.string(),
  startedAt: v.string(),
});

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: the process exists but belongs to another user.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
