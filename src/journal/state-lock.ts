// One worker per state folder: two daemons replaying one journal would run and report executions twice,
// and each would count the month's budget alone. The lock is a file holding its owner and a heartbeat;
// a lock left by a killed process is taken over once its owner is known dead or its heartbeat is stale.
import { mkdir, open, readFile, unlink } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { writeFileDurably } from './durable-file.ts';
import { JournalUnavailableError } from './errors.ts';

export interface LockHolder {
  pid: number;
  hostname: string;
  startedAt: string;
  heartbeatAt: string;
}

export class StateFolderLockedError extends Error {
  readonly holder: LockHolder;

  constructor(folder: string, holder: LockHolder, ageMs: number) {
    super(
      `another df-worker (pid ${holder.pid} on ${holder.hostname}, heartbeat ${Math.round(ageMs / 1000)} s ago) ` +
        `uses the state folder ${folder}; run one worker per DF_STATE_DIR (and per API key), or wait for it to stop`,
    );
    this.name = 'StateFolderLockedError';
    this.holder = holder;
  }
}

export interface StateLockOptions {
  /** A heartbeat older than this marks the lock stale, in ms. Default 30 s. */
  staleAfterMs?: number;
  /** How often the owner refreshes its heartbeat, in ms. Default 10 s. */
  heartbeatMs?: number;
  now?: () => number;
}

export class StateLock {
  readonly file: string;
  readonly #holder: LockHolder;
  readonly #timer: NodeJS.Timeout;
  readonly #now: () => number;
  #released = false;

  private constructor(file: string, holder: LockHolder, heartbeatMs: number, now: () => number) {
    this.file = file;
    this.#holder = holder;
    this.#now = now;
    this.#timer = setInterval(() => void this.#beat(), heartbeatMs);
    this.#timer.unref();
  }

  static async acquire(stateDir: string, options: StateLockOptions = {}): Promise<StateLock> {
    const now = options.now ?? Date.now;
    const file = join(stateDir, 'df-worker.lock');
    try {
      await mkdir(stateDir, { recursive: true, mode: 0o700 });
    } catch (error) {
      throw new JournalUnavailableError(stateDir, error as Error);
    }
    const stamp = new Date(now()).toISOString();
    const holder: LockHolder = {
      pid: process.pid,
      hostname: hostname(),
      startedAt: stamp,
      heartbeatAt: stamp,
    };
    const text = `${JSON.stringify(holder)}\n`;
    try {
      const handle = await open(file, 'wx', 0o600);
      try {
        await handle.writeFile(text);
        await handle.sync();
      } finally {
        await handle.close();
      }
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST')
        throw new JournalUnavailableError(stateDir, error as Error);
      const current = await readHolder(file);
      const staleAfterMs = options.staleAfterMs ?? 30_000;
      if (current && !isStale(current, now(), staleAfterMs)) {
        throw new StateFolderLockedError(stateDir, current, now() - Date.parse(current.heartbeatAt));
      }
      await writeFileDurably(file, text, { mode: 0o600 });
    }
    return new StateLock(file, holder, options.heartbeatMs ?? 10_000, now);
  }

  async release(): Promise<void> {
    if (this.#released) return;
    this.#released = true;
    clearInterval(this.#timer);
    const current = await readHolder(this.file);
    if (current?.pid === this.#holder.pid && current.hostname === this.#holder.hostname) {
      await unlink(this.file).catch(() => undefined);
    }
  }

  async #beat(): Promise<void> {
    if (this.#released) return;
    this.#holder.heartbeatAt = new Date(this.#now()).toISOString();
    // A failed heartbeat only makes the lock look stale sooner; the journal reports the folder's health.
    await writeFileDurably(this.file, `${JSON.stringify(this.#holder)}\n`, { mode: 0o600 }).catch(
      () => undefined,
    );
  }
}

async function readHolder(file: string): Promise<LockHolder | undefined> {
  try {
    const value = JSON.parse(await readFile(file, 'utf8')) as Partial<LockHolder>;
    if (
      typeof value.pid === 'number' &&
      typeof value.hostname === 'string' &&
      typeof value.heartbeatAt === 'string' &&
      typeof value.startedAt === 'string'
    ) {
      return value as LockHolder;
    }
  } catch {
    // Unreadable or half-written: treated as stale below.
  }
  return undefined;
}

function isStale(holder: LockHolder, nowMs: number, staleAfterMs: number): boolean {
  if (holder.hostname === hostname()) {
    // Same machine: the owner's pid tells. Our own pid means a previous life of this container.
    if (holder.pid === process.pid || !processAlive(holder.pid)) return true;
  }
  return nowMs - Date.parse(holder.heartbeatAt) > staleAfterMs;
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
