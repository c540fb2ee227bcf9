// The durable execution journal: one file per claimed execution, written before the handler starts and
// before each report, so a daemon killed at any instant replays every execution it owes the service.
import { mkdir, stat, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { systemClock } from '../clock/clock.ts';
import type { Clock } from '../clock/clock.ts';
import { DamagedRecords, type DamagedRecord, type JournalLogger } from './damaged-records.ts';
import { removeDurably, writeFileDurably } from './durable-file.ts';
import { JournalEntryNotFoundError, JournalUnavailableError, JournalWriteError } from './errors.ts';
import { fileNameForExecution } from './file-name.ts';
import {
  DEAD_LETTER_FOLDER,
  JOURNAL_FOLDER,
  PROBE_PREFIX,
  readDeadLetterFolder,
  readJournalFolder,
  type FoundEntry,
} from './journal-folder.ts';
import { OperationOrder } from './operation-order.ts';
import { serializeJournalEntry } from './records.ts';
import type { ClaimRecord, DeadLetter, JournalEntry, OutcomeRecord } from './records.ts';

// Not an ESM import: its namespace would read node:crypto's lazy webcrypto (see telemetry/http-server.ts).
const { randomBytes } = process.getBuiltinModule('node:crypto');

export type { ClaimRecord, DeadLetter, JournalEntry, OutcomeRecord } from './records.ts';
export type { DamagedRecord, JournalLogger } from './damaged-records.ts';
export { JournalEntryNotFoundError, JournalUnavailableError, JournalWriteError } from './errors.ts';

export interface JournalOptions {
  /** Receives one warning per corrupt file set aside. */
  logger: JournalLogger;
  /** Source of the dead letters' deadAt. Default: the system clock. */
  clock?: Clock;
}

export class Journal {
  /** The folder holding one record per execution owed to the service. */
  readonly folder: string;
  /** The folder holding executions given up on. */
  readonly deadLetterFolder: string;
  readonly #logger: JournalLogger;
  readonly #clock: Clock;
  #entries = new Map<string, JournalEntry>();
  /** Records that cannot be trusted, kept in place until their execution is settled. */
  readonly #damaged: DamagedRecords;
  /** When the journal folder last changed before open() (ms), if it was there: a run used the state folder. */
  #lastChangedAt: number | undefined;
  #deadLetterFiles = new Set<string>();
  #writable = true;
  #lastError: Error | undefined;
  readonly #order = new OperationOrder();
  /** Executions reported while their record could not be removed; recheck() removes them. */
  readonly #unremoved = new Set<string>();

  private constructor(stateDir: string, options: JournalOptions) {
    this.folder = join(stateDir, JOURNAL_FOLDER);
    this.deadLetterFolder = join(stateDir, DEAD_LETTER_FOLDER);
    this.#logger = options.logger;
    this.#clock = options.clock ?? systemClock;
    this.#damaged = new DamagedRecords(this.folder, this.#logger, this.#clock);
  }

  /**
   * Creates the journal folders (mode 0o700), proves they are writable, sets aside corrupt files and loads
   * the records. Rejects with JournalUnavailableError naming the folder when it cannot be used.
   */
  static async open(stateDir: string, options: JournalOptions): Promise<Journal> {
    const journal = new Journal(stateDir, options);
    journal.#lastChangedAt = await stat(journal.folder).then(
      (found) => found.mtimeMs,
      () => undefined,
    );
    await journal.#prepareFolders();
    await journal.pending();
    await journal.deadLetters();
    return journal;
  }

  /** False after a write failed, until recheck() succeeds: the daemon must not claim meanwhile. */
  get writable(): boolean {
    return this.#writable;
  }

  /** The JournalWriteError (or JournalUnavailableError from recheck) that made the journal unwritable. */
  get lastError(): Error | undefined {
    return this.#lastError;
  }

  /** Records owed to the service (damaged ones included) and dead letters kept, as of the last operation (no I/O). */
  get counts(): { pending: number; deadLettered: number } {
    return { pending: this.#entries.size + this.#damaged.size, deadLettered: this.#deadLetterFiles.size };
  }

  /**
   * True when the journal folder existed before this run opened it: the state folder was used before, so a
   * budget.json missing from it was lost, not never written.
   */
  get usedBefore(): boolean {
    return this.#lastChangedAt !== undefined;
  }

  /**
   * When the journal folder last changed before this run opened it (a record written or removed, or a start's
   * probe), in ms: the run that changed it sent a request at about that time. Undefined for a new folder.
   */
  get lastChangedBefore(): number | undefined {
    return this.#lastChangedAt;
  }

  /**
   * True while the journal holds a record of the execution whose report is still owed (claimed, or finished
   * and not yet accepted), from memory: a poll handing it out again must not run it a second time.
   */
  owes(executionId: string): boolean {
    return this.#entries.has(executionId) && !this.#unremoved.has(executionId);
  }

  /** Damaged records found by the last scan and not settled yet, in scan order (no I/O). */
  damaged(): DamagedRecord[] {
    return this.#damaged.list();
  }

  /**
   * Copies a damaged record's bytes into journal/corrupt/ for inspection; call before a new record of the
   * execution replaces it (a kill in between leaves the damaged file in place, to be settled again).
   */
  keepDamagedCopy(executionId: string): Promise<void> {
    return this.#damaged.keepCopy(executionId);
  }

  /**
   * Settles a damaged record that needs no report (`reason` says why, e.g. the service already holds its
   * outcome): its file moves to journal/corrupt/, with a warning naming the execution.
   */
  dismissDamaged(executionId: string, reason: string): Promise<void> {
    return this.#order.ofExecution(executionId, () => this.#damaged.dismiss(executionId, reason));
  }

  /**
   * Durably records a claim (phase 'claimed'); call before the handler starts. Replaces any earlier record.
   * With `outcome`, the record is written finished at once: for an execution that will not be run.
   */
  recordClaim(claim: ClaimRecord, outcome?: OutcomeRecord): Promise<void> {
    const entry: JournalEntry = {
      executionId: claim.executionId,
      taskId: claim.taskId,
      taskKey: claim.taskKey,
      input: claim.input,
      ...(claim.createdAt === undefined ? {} : { createdAt: claim.createdAt }),
      claimedAt: claim.claimedAt,
      ...(outcome === undefined ? { phase: 'claimed' } : { phase: 'finished', outcome }),
      reportAttempts: 0,
      starts: outcome === undefined ? 1 : 0,
      version: 1,
    };
    return this.#order.ofExecution(claim.executionId, () => this.#save(entry, 'record the claim'));
  }

  /** Durably counts one more run of the handler begun for a claimed execution (a replay's rerun). */
  recordStart(executionId: string): Promise<void> {
    return this.#order.ofExecution(executionId, async () => {
      const entry = this.#existing(executionId, 'count a start');
      await this.#save({ ...entry, starts: (entry.starts ?? 1) + 1 }, 'count a start');
    });
  }

  /** Durably records the outcome (phase 'finished'); call before reporting it. */
  recordOutcome(executionId: string, outcome: OutcomeRecord): Promise<void> {
    return this.#order.ofExecution(executionId, async () => {
      const entry = this.#existing(executionId, 'record the outcome');
      const { status, output, attempts, finishedAt } = outcome;
      await this.#save(
        { ...entry, phase: 'finished', outcome: { status, output, attempts, finishedAt } },
        'record the outcome',
      );
    });
  }

  /** Durably counts one more report sent for the execution's outcome. */
  recordReportAttempt(executionId: string): Promise<void> {
    return this.#order.ofExecution(executionId, async () => {
      const entry = this.#existing(executionId, 'count a report attempt');
      await this.#save({ ...entry, reportAttempts: entry.reportAttempts + 1 }, 'count a report attempt');
    });
  }

  /**
   * Removes the record once the service accepted the report; completing twice is harmless. When the removal
   * fails, the next successful recheck() removes it, so a folder that comes back does not replay it.
   */
  complete(executionId: string): Promise<void> {
    return this.#order.ofExecution(executionId, async () => {
      const file = this.#recordFile(executionId);
      try {
        await this.#attempt(executionId, 'remove the record', this.folder, () => removeDurably(file));
      } catch (error) {
        this.#unremoved.add(executionId);
        throw error;
      }
      this.#unremoved.delete(executionId);
      this.#entries.delete(executionId);
    });
  }

  /** Moves the record to the dead-letter folder with the service's final answer, for an operator. */
  deadLetter(executionId: string, answer: DeadLetter['answer']): Promise<void> {
    return this.#order.ofExecution(executionId, async () => {
      const entry = this.#existing(executionId, 'dead-letter the record');
      const letter: DeadLetter = {
        entry,
        deadAt: new Date(this.#clock.now()).toISOString(),
        answer: {
          status: answer.status,
          ...(answer.code === undefined ? {} : { code: answer.code }),
          ...(answer.message === undefined ? {} : { message: answer.message }),
        },
      };
      const letterFile = join(this.deadLetterFolder, `${fileNameForExecution(executionId)}.json`);
      const text = `${JSON.stringify(letter, null, 2)}\n`;
      // Letter first: a kill between the two steps leaves both, and the next scan finishes the move.
      await this.#attempt(executionId, 'write the dead letter', this.deadLetterFolder, () =>
        writeFileDurably(letterFile, text),
      );
      this.#deadLetterFiles.add(letterFile);
      const file = this.#recordFile(executionId);
      await this.#attempt(executionId, 'remove the dead-lettered record', this.folder, () =>
        removeDurably(file),
      );
      this.#entries.delete(executionId);
    });
  }

  /**
   * Every valid record, oldest claim first, read from disk. Sets aside corrupt files into journal/corrupt/
   * (one warning each) and removes leftovers of interrupted writes; it never throws for those.
   */
  pending(): Promise<JournalEntry[]> {
    return this.#order.alone(async () => {
      const content = await this.#readFolder(() => readJournalFolder(this.folder, this.deadLetterFolder));
      for (const leftover of content.leftovers) await unlink(leftover).catch(() => undefined);
      await this.#damaged.triage(content.corrupt, content.entries);
      for (const { file } of content.alreadyDeadLettered) await removeDurably(file).catch(() => undefined);
      for (const found of content.entries) if (found.origin !== 'current') await this.#upgrade(found);
      this.#entries = new Map(content.entries.map(({ entry }) => [entry.executionId, entry]));
      return content.entries.map(({ entry }) => structuredClone(entry));
    });
  }

  /** Every dead letter, oldest first; an unreadable one is skipped with a warning. */
  deadLetters(): Promise<DeadLetter[]> {
    return this.#order.alone(async () => {
      const content = await this.#readFolder(() => readDeadLetterFolder(this.deadLetterFolder));
      for (const { file, problem } of content.invalid) {
        this.#logger.warn(
          { file, problem },
          `dead letter ${file} cannot be read (${problem}); it is skipped`,
        );
      }
      this.#deadLetterFiles = new Set(content.files);
      return content.letters.map(({ letter }) => structuredClone(letter));
    });
  }

  /**
   * Removes a dead letter for good: an operator discarded it, or its report was sent again and accepted.
   * False when no dead letter of this execution is kept.
   */
  discardDeadLetter(executionId: string): Promise<boolean> {
    let removed = false;
    return this.#order
      .ofExecution(executionId, async () => {
        const letterFile = join(this.deadLetterFolder, `${fileNameForExecution(executionId)}.json`);
        if (!this.#deadLetterFiles.has(letterFile)) return;
        await this.#attempt(executionId, 'remove the dead letter', this.deadLetterFolder, () =>
          removeDurably(letterFile),
        );
        this.#deadLetterFiles.delete(letterFile);
        removed = true;
      })
      .then(() => removed);
  }

  /**
   * Proves the folders writable again (after an operator fixed them) and removes the records of executions
   * reported meanwhile; true restores writable.
   */
  async recheck(): Promise<boolean> {
    try {
      await this.#prepareFolders();
      for (const executionId of [...this.#unremoved]) await this.complete(executionId);
    } catch (error) {
      this.#writable = false;
      this.#lastError = error as Error;
      return false;
    }
    this.#writable = true;
    this.#lastError = undefined;
    return true;
  }

  async #prepareFolders(): Promise<void> {
    for (const folder of [this.folder, this.deadLetterFolder]) {
      try {
        await mkdir(folder, { recursive: true, mode: 0o700 });
        const probe = join(folder, `${PROBE_PREFIX}${process.pid}-${randomBytes(6).toString('hex')}`);
        await writeFileDurably(probe, 'probe\n');
        await removeDurably(probe);
      } catch (error) {
        throw new JournalUnavailableError(folder, error as Error);
      }
    }
  }

  /**
   * Writes a record of an older release again in this release's layout (with its checksum), so that a later
   * older-release step is told apart from damage. A failed write leaves the record as it was: still read.
   */
  async #upgrade({ file, entry, origin }: FoundEntry): Promise<void> {
    try {
      await writeFileDurably(file, serializeJournalEntry(entry));
    } catch (error) {
      this.#logger.warn(
        { file, err: error },
        `could not upgrade journal record ${file} written by an older release; it is read as it is`,
      );
      return;
    }
    this.#logger.info?.(
      { file, executionId: entry.executionId, origin },
      `journal record of execution ${entry.executionId} was written by an older release; upgraded in place`,
    );
  }

  async #readFolder<T>(read: () => Promise<T>): Promise<T> {
    try {
      return await read();
    } catch (error) {
      throw new JournalUnavailableError(this.folder, error as Error);
    }
  }

  async #save(entry: JournalEntry, action: string): Promise<void> {
    // Serialized before the write so a value JSON cannot hold fails as itself, not as a disk failure.
    const text = serializeJournalEntry(entry);
    const file = this.#recordFile(entry.executionId);
    await this.#attempt(entry.executionId, action, this.folder, () => writeFileDurably(file, text));
    // The copy in memory is what a restart would read back, never an object the caller still holds.
    const copy = JSON.parse(text) as JournalEntry & { checksum?: string };
    delete copy.checksum;
    this.#entries.set(entry.executionId, copy);
    this.#damaged.replaced(entry.executionId);
  }

  async #attempt(
    executionId: string,
    action: string,
    folder: string,
    write: () => Promise<void>,
  ): Promise<void> {
    try {
      await write();
    } catch (error) {
      const failure = new JournalWriteError(executionId, action, folder, error as Error);
      this.#writable = false;
      this.#lastError = failure;
      throw failure;
    }
  }

  #existing(executionId: string, action: string): JournalEntry {
    const entry = this.#entries.get(executionId);
    if (entry === undefined) throw new JournalEntryNotFoundError(executionId, action);
    return entry;
  }

  #recordFile(executionId: string): string {
    return join(this.folder, `${fileNameForExecution(executionId)}.json`);
  }
}
