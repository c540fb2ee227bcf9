// Failures of the journal a caller acts on: an unusable state folder at start, a write that did not
// reach the disk (stop claiming), an execution the journal does not know (a bug in the caller).
import { errorCode } from './durable-file.ts';
import type { ErrorCode } from '../errors/catalogue.ts';

/** The state folder cannot hold the journal (raised by Journal.open and by reads of the folder). */
export class JournalUnavailableError extends Error {
  readonly code: ErrorCode = 'DFW_JOURNAL_UNAVAILABLE';
  /** The folder that failed. */
  readonly folder: string;
  override readonly cause: Error;

  constructor(folder: string, cause: Error) {
    super(
      `cannot keep the execution journal: ${explainFolderFailure(folder, cause)}; ` +
        "make the folder writable by df-worker's user, or choose another state folder",
    );
    this.name = 'JournalUnavailableError';
    this.folder = folder;
    this.cause = cause;
  }
}

/** A journal record could not be written; the journal turns unwritable until recheck() succeeds. */
export class JournalWriteError extends Error {
  readonly code: ErrorCode = 'DFW_JOURNAL_WRITE';
  readonly executionId: string;
  /** The folder the write was aimed at. */
  readonly folder: string;
  override readonly cause: Error;

  constructor(executionId: string, action: string, folder: string, cause: Error) {
    super(
      `could not ${action} of execution ${executionId}: ${explainFolderFailure(folder, cause)}: ` +
        'df-worker stops claiming executions until it is writable',
    );
    this.name = 'JournalWriteError';
    this.executionId = executionId;
    this.folder = folder;
    this.cause = cause;
  }
}

/** An operation named an execution that has no record (never claimed, or already completed). */
export class JournalEntryNotFoundError extends Error {
  readonly code: ErrorCode = 'DFW_JOURNAL_ENTRY_NOT_FOUND';
  readonly executionId: string;

  constructor(executionId: string, action: string) {
    super(
      `cannot ${action} of execution ${executionId}: the journal holds no record of it; ` +
        'record its claim first (an execution already completed or dead-lettered cannot be changed)',
    );
    this.name = 'JournalEntryNotFoundError';
    this.executionId = executionId;
  }
}

/** Says in an operator's words why a folder failed, from the system error code. */
export function explainFolderFailure(folder: string, cause: Error): string {
  const code = errorCode(cause);
  switch (code) {
    case 'EROFS':
      return `state folder ${folder} is read-only (EROFS)`;
    case 'EACCES':
    case 'EPERM':
      return `state folder ${folder} is not writable by this user (${code})`;
    case 'ENOSPC':
      return `the disk holding state folder ${folder} is full (ENOSPC)`;
    case 'EDQUOT':
      return `the disk quota of state folder ${folder} is exhausted (EDQUOT)`;
    case 'ENOENT':
    case 'ENOTDIR':
      return `state folder ${folder} is missing or is not a folder (${code})`;
    case 'EIO':
      return `the disk holding state folder ${folder} reported an I/O error (EIO)`;
    default:
      return `state folder ${folder} failed: ${cause.message}`;
  }
}
