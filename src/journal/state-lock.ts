// One worker per state folder: two daemons replaying one journal would run and report executions twice,
// and each would count the month's budget alone. The lock is a file holding its owner and a heartbeat;
// a lock left by a killed process is taken over once its owner is known dead or its heartbeat is stale.
// Workers that start together on a stale lock race for it: exactly one takes it over, the others refuse.
import { link, mkdir, open, readFile, unlink } from 'node:fs/promises';
import { hostname } from 'node:os';
import { dirname, join } from 'node:path';
import * as v from 'valibot';
import { errorCode, syncDirectory, temporaryFileName, writeFileDurably } from './durable-file.ts';
import { JournalUnavailableError } from './errors.ts';

// Not an ESM import: its namespace would read node:crypto's lazy webcrypto (see telemetry/http-server.ts).
const { createHash } = process.getBuiltinModule('node:crypto');

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

/** Each pass of acquire follows a change another worker made to the lock; this many means a storm of them. */
const MAX_ATTEMPTS = 100;

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
        if (await createExclusively(file, text)) return new StateLock(file, holder, heartbeatMs, now);
        const current = await readText(file);
        // Gone between the two looks: its owner released it.
        if (current === undefined) continue;
        const owner = parseHolder(current);
        if (owner && !isStale(owner, now(), staleAfterMs)) {
          throw new StateFolderLockedError(stateDir, owner, now() - Date.parse(owner.heartbeatAt));
        }
        const outcome = await takeOver(file, current, text, now(), staleAfterMs);
        if (outcome === 'taken') return new StateLock(file, holder, heartbeatMs, now);
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
