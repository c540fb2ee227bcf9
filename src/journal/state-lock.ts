// One worker per state folder: two daemons replaying one journal would run and report executions twice,
// and each would count the month's budget alone. The lock is a file holding its owner and a heartbeat;
// a lock left by a killed process is taken over once its owner is known dead or its heartbeat is stale.
// Workers that start together on a stale lock race for it: exactly one takes it over, the others refuse.
// The owner checks that the lock is still its own (verify, and a timer): a lock that vanished (the state
// folder deleted) or names another owner means a second daemon may spend the key: it must stop.
import { readFileSync, statSync } from 'node:fs';
import { link, mkdir, open, readFile, stat, unlink } from 'node:fs/promises';
import { hostname } from 'node:os';
import { dirname, join } from 'node:path';
import * as v from 'valibot';
import { errorCode, syncDirectory, temporaryFileName, writeFileDurably } from './durable-file.ts';
import { JournalUnavailableError } from './errors.ts';
import type { ErrorCode } from '../errors/catalogue.ts';

// Not an ESM import: its namespace would read node:crypto's lazy webcrypto (see telemetry/http-server.ts).
const { createHash } = process.getBuiltinModule('node:crypto');

export interface LockHolder {
  pid: number;
  hostname: string;
  startedAt: string;
  heartbeatAt: string;
}

export class StateFolderLockedError extends Error {
  readonly code: ErrorCode = 'DFW_STATE_LOCKED';
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

/** Each pass of acquire follows a change another worker made to the lock; this many means a storm of them. */
const MAX_ATTEMPTS = 100;

/** The lock file's identity as this owner last wrote it: a stat that still matches needs no read. */
interface Seen {
  ino: number;
  size: number;
  mtimeMs: number;
}

export class StateLock {
  readonly file: string;
  /** The holder of the stale lock this one took over (a run that died), if any. */
  readonly previousHolder: LockHolder | undefined;
  readonly #holder: LockHolder;
  readonly #timer: NodeJS.Timeout;
  readonly #now: () => number;
  #released = false;
  /** The heartbeat write in progress, if any: release() waits for it. */
  #beating: Promise<void> = Promise.resolve();
  #beatInFlight = false;
  #seen: Seen | undefined;
  /** Why the lock is no longer this owner's, once found. */
  #lost: string | undefined;
  #watch: NodeJS.Timeout | undefined;

  private constructor(
    file: string,
    holder: LockHolder,
    heartbeatMs: number,
    now: () => number,
    previousHolder?: LockHolder,
  ) {
    this.file = file;
    this.#holder = holder;
    this.#now = now;
    this.previousHolder = previousHolder;
    this.#timer = setInterval(() => void this.#beat(), heartbeatMs);
    this.#timer.unref();
  }

  /**
   * Undefined while the lock file is this owner's; else why not (vanished, or another owner's), for good.
   * Cheap enough to call before every claim: a stat, and a read of the small file only when the stat differs
   * from this owner's last write.
   */
  verify(): string | undefined {
    if (this.#lost !== undefined || this.#released) return this.#lost;
    let current: Seen;
    try {
      current = statSync(this.file);
    } catch (error) {
      return this.#lose(
        errorCode(error) === 'ENOENT'
          ? `its lock file ${this.file} vanished (the state folder was deleted or emptied)`
          : `its lock file ${this.file} cannot be read (${(error as Error).message})`,
      );
    }
    const seen = this.#seen;
    if (seen && seen.ino === current.ino && seen.size === current.size && seen.mtimeMs === current.mtimeMs) {
      return undefined;
    }
    let owner: LockHolder | undefined;
    try {
      owner = parseHolder(readFileSync(this.file, 'utf8'));
    } catch (error) {
      if (errorCode(error) === 'ENOENT') return this.verify();
      return this.#lose(`its lock file ${this.file} cannot be read (${(error as Error).message})`);
    }
    if (owner && this.#isOwn(owner)) {
      this.#seen = { ino: current.ino, size: current.size, mtimeMs: current.mtimeMs };
      return undefined;
    }
    return this.#lose(
      owner
        ? `its lock file ${this.file} now names another owner (pid ${owner.pid} on ${owner.hostname}, started ${owner.startedAt})`
        : `its lock file ${this.file} was replaced by something that is not a lock`,
    );
  }

  /** Calls `onLost` once, with the reason, when verify() finds the lock lost; checked every `intervalMs`. */
  watch(intervalMs: number, onLost: (reason: string) => void): void {
    clearInterval(this.#watch);
    this.#watch = setInterval(() => {
      const lost = this.verify();
      if (lost === undefined) return;
      clearInterval(this.#watch);
      onLost(lost);
    }, intervalMs);
    this.#watch.unref();
  }

  #isOwn(owner: LockHolder): boolean {
    const own = this.#holder;
    return owner.pid === own.pid && owner.hostname === own.hostname && owner.startedAt === own.startedAt;
  }

  #lose(reason: string): string {
    this.#lost = reason;
    clearInterval(this.#timer);
    return reason;
  }

  async #remember(): Promise<void> {
    const current = await stat(this.file).catch(() => undefined);
    if (current) this.#seen = { ino: current.ino, size: current.size, mtimeMs: current.mtimeMs };
  }

  static async acquire(stateDir: string, options: StateLockOptions = {}): Promise<StateLock> {
    const now = options.now ?? Date.now;
    const staleAfterMs = options.staleAfterMs ?? 30_000;
    const heartbeatMs = options.heartbeatMs ?? 10_000;
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
      for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
        if (await createExclusively(file, text)) {
          return await StateLock.#made(new StateLock(file, holder, heartbeatMs, now));
        }
        const current = await readText(file);
        // Gone between the two looks: its owner released it.
        if (current === undefined) continue;
        const owner = parseHolder(current);
        if (owner && !isStale(owner, now(), staleAfterMs)) {
          throw new StateFolderLockedError(stateDir, owner, now() - Date.parse(owner.heartbeatAt));
        }
        const outcome = await takeOver(file, current, text, now(), staleAfterMs);
        if (outcome === 'taken') {
          return await StateLock.#made(new StateLock(file, holder, heartbeatMs, now, owner));
        }
        if (outcome !== 'changed') {
          throw new StateFolderLockedError(stateDir, outcome, now() - Date.parse(outcome.heartbeatAt));
        }
      }
    } catch (error) {
      if (error instanceof StateFolderLockedError) throw error;
      throw new JournalUnavailableError(stateDir, error as Error);
    }
    throw new JournalUnavailableError(
      stateDir,
      new Error(`${file} kept changing while this worker tried to take it (other workers starting at once)`),
    );
  }

  static async #made(lock: StateLock): Promise<StateLock> {
    await lock.#remember();
    return lock;
  }

  async release(): Promise<void> {
    if (this.#released) return;
    this.#released = true;
    clearInterval(this.#timer);
    clearInterval(this.#watch);
    // A heartbeat already on its way would land after the unlink: the lock (or its temporary file) left behind.
    await this.#beating;
    const current = await readHolder(this.file);
    if (current?.pid === this.#holder.pid && current.hostname === this.#holder.hostname) {
      await unlink(this.file).catch(() => undefined);
    }
  }

  #beat(): Promise<void> {
    // One write at a time: a tick that comes while the last write is still on its way (a stalled disk, or
    // a loaded machine at a short heartbeatMs) is skipped, so release() waits for every write there is.
    if (this.#beatInFlight) return this.#beating;
    this.#beatInFlight = true;
    this.#beating = this.#writeBeat().finally(() => {
      this.#beatInFlight = false;
    });
    return this.#beating;
  }

  async #writeBeat(): Promise<void> {
    // A lock no longer this owner's is never written again: that would take it back from the new owner.
    if (this.#released || this.verify() !== undefined) return;
    this.#holder.heartbeatAt = new Date(this.#now()).toISOString();
    // A failed heartbeat only makes the lock look stale sooner; the journal reports the folder's health.
    await writeFileDurably(this.file, `${JSON.stringify(this.#holder)}\n`, { mode: 0o600 }).catch(
      () => undefined,
    );
    await this.#remember();
  }
}

/**
 * The file a worker creates to claim the takeover of the stale lock whose content is `staleContent`.
 * Generation 0 is tried first; a claim left by a worker that died mid-takeover is passed by the next one.
 */
export function takeoverClaimFile(lockFile: string, staleContent: string, generation = 0): string {
  const digest = createHash('sha256').update(staleContent).digest('hex').slice(0, 16);
  return `${lockFile}.takeover-${digest}.${generation}`;
}

/**
 * Replaces the stale lock `staleText` with `ownText` unless another worker claimed that takeover first
 * (its claimant is returned) or the lock changed meanwhile ('changed': look again).
 *
 * Overwriting after a check would let two workers that both judged the lock stale both take it. So
 * the claim is a file named after the stale content, created exclusively: one worker gets it. Its
 * holder then checks that the lock still holds that content; nobody else can change it meanwhile (a
 * claim on the same content is needed, and the lock is never absent), so the atomic rename over it is safe.
 */
async function takeOver(
  file: string,
  staleText: string,
  ownText: string,
  nowMs: number,
  staleAfterMs: number,
): Promise<'taken' | 'changed' | LockHolder> {
  for (let generation = 0; ; generation++) {
    const claim = takeoverClaimFile(file, staleText, generation);
    if (await createExclusively(claim, ownText)) {
      try {
        if ((await readText(file)) !== staleText) return 'changed';
        await writeFileDurably(file, ownText, { mode: 0o600 });
        return 'taken';
      } finally {
        // Once the lock no longer holds staleText it never will again: every claim on it is moot.
        for (let passed = generation; passed >= 0; passed--) {
          await unlink(takeoverClaimFile(file, staleText, passed)).catch(() => undefined);
        }
      }
    }
    const claimText = await readText(claim);
    if (claimText === undefined) return 'changed';
    const claimant = parseHolder(claimText);
    if (claimant && !isStale(claimant, nowMs, staleAfterMs)) return claimant;
    // Its claimant died mid-takeover. Removing its claim could remove a live one that replaced it,
    // so the next generation takes its place.
  }
}

/** Hard links not supported by the folder's file system (some network shares). */
const UNSUPPORTED_LINK = new Set(['EPERM', 'ENOTSUP', 'EOPNOTSUPP', 'ENOSYS']);

/**
 * Creates `path` holding `text` unless it exists. The content is written before the name appears, so a
 * reader never sees a half-written lock and judges it stale while its owner is still writing it.
 */
async function createExclusively(path: string, text: string): Promise<boolean> {
  const temporary = join(dirname(path), temporaryFileName(path));
  try {
    await writeNewFile(temporary, text);
    try {
      await link(temporary, path);
    } catch (error) {
      if (errorCode(error) === 'EEXIST') return false;
      if (!UNSUPPORTED_LINK.has(errorCode(error) ?? '')) throw error;
      return await createInPlace(path, text);
    }
  } finally {
    await unlink(temporary).catch(() => undefined);
  }
  await syncDirectory(dirname(path));
  return true;
}

/** Fallback without hard links: the file is briefly empty, so a racing worker may judge it unreadable. */
async function createInPlace(path: string, text: string): Promise<boolean> {
  try {
    await writeNewFile(path, text);
  } catch (error) {
    if (errorCode(error) === 'EEXIST') return false;
    throw error;
  }
  await syncDirectory(dirname(path));
  return true;
}

async function writeNewFile(path: string, text: string): Promise<void> {
  const handle = await open(path, 'wx', 0o600);
  try {
    await handle.writeFile(text);
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** The file's content, or undefined when it does not exist. */
async function readText(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, 'utf8');
  } catch (error) {
    if (errorCode(error) === 'ENOENT') return undefined;
    throw error;
  }
}

const HOLDER = v.object({
  pid: v.number(),
  hostname: v.string(),
  startedAt: v.string(),
  heartbeatAt: v.string(),
});

/** The holder named in `file`; undefined when it is missing or unreadable. */
async function readHolder(file: string): Promise<LockHolder | undefined> {
  return parseHolder((await readText(file).catch(() => undefined)) ?? '');
}

/** The holder named by a lock file's content; undefined when unreadable or half-written (treated as stale). */
function parseHolder(text: string): LockHolder | undefined {
  try {
    const value: unknown = JSON.parse(text);
    if (v.is(HOLDER, value)) return value;
  } catch {
    // Falls through to undefined.
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
