// Journal files that cannot be trusted (truncated, not JSON, wrong types, checksum mismatch). One whose name
// gives its execution stays in place, a DamagedRecord, until the daemon settles that execution with the service;
// any other is moved to journal/corrupt/ at once. Either way its bytes are kept for inspection, with a warning.
import { copyFile, mkdir, rename } from 'node:fs/promises';
import { basename, join } from 'node:path';
import type { Clock } from '../clock/clock.ts';
import { errorCode } from './durable-file.ts';
import { CORRUPT_FOLDER, type CorruptFile, type FoundEntry } from './journal-folder.ts';

/** The part of a logger the journal uses; a pino logger fits. */
export interface JournalLogger {
  warn(fields: Record<string, unknown>, message: string): void;
  /** Records of an older release upgraded on load, one line each. */
  info?(fields: Record<string, unknown>, message: string): void;
}

// Not an ESM import: its namespace would read node:crypto's lazy webcrypto (see telemetry/http-server.ts).
const { randomBytes } = process.getBuiltinModule('node:crypto');

/**
 * A record file that cannot be trusted but whose name gives the execution it was written for. It stays where
 * it is, so a restart finds it again, until the daemon settles the execution with the service (see
 * Journal.keepDamagedCopy and Journal.dismissDamaged).
 */
export interface DamagedRecord {
  executionId: string;
  file: string;
  problem: string;
}

export class DamagedRecords {
  readonly #journalFolder: string;
  readonly #logger: JournalLogger;
  readonly #clock: Clock;
  #records = new Map<string, DamagedRecord>();

  constructor(journalFolder: string, logger: JournalLogger, clock: Clock) {
    this.#journalFolder = journalFolder;
    this.#logger = logger;
    this.#clock = clock;
  }

  get size(): number {
    return this.#records.size;
  }

  /** The damaged records not settled yet, in scan order. */
  list(): DamagedRecord[] {
    return [...this.#records.values()].map((record) => ({ ...record }));
  }

  /**
   * Sorts the corrupt files a scan found: one whose execution has no valid record is kept in place as damaged
   * (warned about once, however many scans find it), any other is set aside. `entries`: the valid records.
   */
  async triage(corrupt: readonly CorruptFile[], entries: readonly FoundEntry[]): Promise<void> {
    const damaged = new Map<string, DamagedRecord>();
    for (const file of corrupt) {
      const { executionId } = file;
      // Kept in place while its execution is unsettled: the service is asked about it (see DamagedRecord).
      if (executionId !== undefined && !entries.some((e) => e.entry.executionId === executionId)) {
        if (!this.#records.has(executionId)) {
          this.#logger.warn(
            { file: file.file, problem: file.problem, executionId },
            `journal file ${file.file} is ${file.problem}; execution ${executionId} is fetched from the ` +
              'service and run again or reported (its bytes are kept in journal/corrupt/)',
          );
        }
        damaged.set(executionId, { executionId, file: file.file, problem: file.problem });
      } else await this.setAside(file);
    }
    this.#records = damaged;
  }

  /** Copies the execution's damaged record into journal/corrupt/, before a new record replaces it. */
  async keepCopy(executionId: string): Promise<void> {
    const damaged = this.#records.get(executionId);
    if (damaged === undefined) return;
    try {
      await copyFile(damaged.file, await this.#asideName(damaged.file));
    } catch (error) {
      this.#logger.warn(
        { file: damaged.file, code: errorCode(error) },
        `could not keep a copy of the damaged journal file ${damaged.file} (${(error as Error).message}); ` +
          'a new record of the execution replaces it',
      );
    }
  }

  /** Settles the execution's damaged record with no report: it moves to journal/corrupt/, `reason` in the warning. */
  async dismiss(executionId: string, reason: string): Promise<void> {
    const damaged = this.#records.get(executionId);
    if (damaged === undefined) return;
    await this.setAside(damaged, `; ${reason}`);
    this.#records.delete(executionId);
  }

  /** A valid record now stands where a damaged one was: the execution is settled like any other. */
  replaced(executionId: string): void {
    this.#records.delete(executionId);
  }

  /** Moves `file` to journal/corrupt/ with a warning; one that cannot be moved is ignored, with a warning too. */
  async setAside({ file, problem }: CorruptFile, settled = ''): Promise<void> {
    try {
      const movedTo = await this.#asideName(file);
      await rename(file, movedTo);
      this.#logger.warn(
        { file, movedTo, problem },
        `journal file ${file} is ${problem}${settled}; moved it to ${movedTo} (its bytes are kept for inspection)`,
      );
    } catch (error) {
      this.#logger.warn(
        { file, problem, code: errorCode(error) },
        `journal file ${file} is ${problem} and could not be moved aside (${(error as Error).message}); it is ignored`,
      );
    }
  }

  /** A new name in journal/corrupt/ for `file`'s bytes (the folder is created). */
  async #asideName(file: string): Promise<string> {
    const corruptFolder = join(this.#journalFolder, CORRUPT_FOLDER);
    await mkdir(corruptFolder, { recursive: true, mode: 0o700 });
    return join(corruptFolder, `${basename(file)}.${this.#clock.now()}-${randomBytes(3).toString('hex')}`);
  }
}
