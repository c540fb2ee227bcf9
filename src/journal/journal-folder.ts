// Reads the journal's folders without changing them and sorts every file into what it is: a record to
// replay, a record whose dead letter is already written, a corrupt file, or a leftover of a killed write.
// Journal acts on the result; describeJournal only reports it.
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { errorCode, isTemporaryFileName, readJsonFile } from './durable-file.ts';
import { executionIdFromFileName, fileNameForExecution } from './file-name.ts';
import { checkDeadLetter, checkJournalRecord, type RecordOrigin } from './records.ts';
import type { DeadLetter, JournalEntry } from './records.ts';

/** Names of the sub-folders of the state folder and of the journal folder. */
export const JOURNAL_FOLDER = 'journal';
export const DEAD_LETTER_FOLDER = 'dead-letter';
export const CORRUPT_FOLDER = 'corrupt';
/** Prefix of the files written and removed to prove a folder is writable. */
export const PROBE_PREFIX = '.df-worker-probe-';

export interface FoundEntry {
  /** Absolute path of the record file. */
  file: string;
  entry: JournalEntry;
  /** Who wrote it: a record of an older release is upgraded (written again with a checksum) when loaded. */
  origin: RecordOrigin;
}

export interface CorruptFile {
  file: string;
  problem: string;
  /**
   * The execution the file was written for, when its name tells (or, for a hashed name, when an id found in
   * its bytes gives that very name): the execution can then be fetched from the service and settled.
   */
  executionId?: string;
}

export interface JournalFolderContent {
  /** Valid records still to report, oldest claim first. */
  entries: FoundEntry[];
  /** Valid records whose dead letter is already written (a kill came between the two steps). */
  alreadyDeadLettered: FoundEntry[];
  /** Files that are not valid records, with the reason. */
  corrupt: CorruptFile[];
  /** Temp and probe files of writes a kill interrupted; the previous state is intact without them. */
  leftovers: string[];
  /** Files already moved to the corrupt folder by an earlier scan. */
  setAside: string[];
}

export interface DeadLetterFolderContent {
  letters: { file: string; letter: DeadLetter }[];
  invalid: CorruptFile[];
  /** Every dead-letter file, valid or not (what counts as dead-lettered). */
  files: string[];
}

export async function readJournalFolder(
  journalDir: string,
  deadLetterDir: string,
): Promise<JournalFolderContent> {
  const content: JournalFolderContent = {
    entries: [],
    alreadyDeadLettered: [],
    corrupt: [],
    leftovers: [],
    setAside: [],
  };
  for (const item of await listFolder(journalDir)) {
    const file = join(journalDir, item.name);
    if (item.isDirectory()) {
      if (item.name === CORRUPT_FOLDER) {
        const setAside = await listFolder(file);
        content.setAside.push(...setAside.filter((f) => f.isFile()).map((f) => join(file, f.name)));
      }
    } else if (isTemporaryFileName(item.name) || item.name.startsWith(PROBE_PREFIX)) {
      content.leftovers.push(file);
    } else if (item.name.endsWith('.json')) {
      const found = await readRecord(file, item.name);
      if (found === undefined) continue;
      if ('problem' in found) content.corrupt.push(found);
      else if (await hasDeadLetter(deadLetterDir, found.entry)) content.alreadyDeadLettered.push(found);
      else content.entries.push(found);
    }
  }
  content.entries.sort((a, b) => compareClaims(a.entry, b.entry));
  return content;
}

export async function readDeadLetterFolder(deadLetterDir: string): Promise<DeadLetterFolderContent> {
  const content: DeadLetterFolderContent = { letters: [], invalid: [], files: [] };
  for (const item of await listFolder(deadLetterDir)) {
    if (!item.isFile() || !item.name.endsWith('.json') || item.name.startsWith('.')) continue;
    const file = join(deadLetterDir, item.name);
    content.files.push(file);
    let value: unknown;
    try {
      value = await readJsonFile(file);
    } catch (error) {
      if (errorCode(error) !== undefined) throw error;
      content.invalid.push({ file, problem: (error as Error).message });
      continue;
    }
    if (value === undefined) continue;
    const checked = checkDeadLetter(value);
    if (checked.ok) content.letters.push({ file, letter: checked.value });
    else content.invalid.push({ file, problem: checked.problem });
  }
  content.letters.sort((a, b) => ordinal(a.letter.deadAt, b.letter.deadAt));
  return content;
}

/** Oldest claim first; the id breaks ties so the order is stable across restarts. */
export function compareClaims(a: JournalEntry, b: JournalEntry): number {
  const byTime = Date.parse(a.claimedAt) - Date.parse(b.claimedAt);
  if (byTime !== 0 && !Number.isNaN(byTime)) return byTime;
  return ordinal(a.claimedAt, b.claimedAt) || ordinal(a.executionId, b.executionId);
}

/**
 * Code-unit order, the same on every machine (ISO instants and ids sort right so). Not localeCompare, which
 * orders by the locale's collation and pages in Intl's data (~3 MB resident) at the first replay.
 */
function ordinal(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

async function readRecord(file: string, name: string): Promise<FoundEntry | CorruptFile | undefined> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    if (errorCode(error) === 'ENOENT') return undefined;
    throw error;
  }
  const damaged = (problem: string): CorruptFile => {
    const executionId = executionIdOfRecordFile(name, text);
    return executionId === undefined ? { file, problem } : { file, problem, executionId };
  };
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    return damaged(`not valid JSON (${(error as Error).message})`);
  }
  const checked = checkJournalRecord(value);
  if (!checked.ok) return damaged(`not a journal record: ${checked.problem}`);
  const expected = `${fileNameForExecution(checked.value.executionId)}.json`;
  if (expected !== name) return damaged(`misnamed (its executionId belongs in ${expected})`);
  return { file, entry: checked.value, origin: checked.origin };
}

/**
 * The execution a damaged record file was written for: its name, decoded; for a name hashed because the id
 * was too long, an `"executionId": "..."` still readable in its bytes, when that id gives this very name.
 */
export function executionIdOfRecordFile(name: string, text: string): string | undefined {
  const stem = name.slice(0, -'.json'.length);
  const fromName = executionIdFromFileName(stem);
  if (fromName !== undefined) return fromName;
  const match = /"executionId"\s*:\s*("(?:[^"\\]|\\.)*")/.exec(text);
  if (!match) return undefined;
  try {
    const id: unknown = JSON.parse(match[1]!);
    return typeof id === 'string' && id !== '' && fileNameForExecution(id) === stem ? id : undefined;
  } catch {
    return undefined;
  }
}

async function hasDeadLetter(deadLetterDir: string, entry: JournalEntry): Promise<boolean> {
  let value: unknown;
  try {
    value = await readJsonFile(join(deadLetterDir, `${fileNameForExecution(entry.executionId)}.json`));
  } catch {
    return false;
  }
  const checked = checkDeadLetter(value);
  return (
    checked.ok &&
    checked.value.entry.executionId === entry.executionId &&
    checked.value.entry.claimedAt === entry.claimedAt
  );
}

async function listFolder(folder: string) {
  try {
    return await readdir(folder, { withFileTypes: true });
  } catch (error) {
    if (errorCode(error) === 'ENOENT') return [];
    throw error;
  }
}
