// What a journal's records hold and show, read without opening a Journal: nothing moved, removed or upgraded.
// For the `df-worker journal` command, and for the budget's restore, which counts the requests they prove.
import { join } from 'node:path';
import {
  DEAD_LETTER_FOLDER,
  JOURNAL_FOLDER,
  readDeadLetterFolder,
  readJournalFolder,
} from './journal-folder.ts';
import type { DeadLetter, JournalEntry } from './records.ts';

/**
 * What the journal of `stateDir` holds, for the `df-worker journal` command. Read-only: moves and removes
 * nothing. `corrupt` lists files already set aside, files a Journal would set aside, and unreadable dead
 * letters (absolute paths; the reason of each was logged when it was set aside).
 */
export async function describeJournal(
  stateDir: string,
): Promise<{ pending: JournalEntry[]; deadLetters: DeadLetter[]; corrupt: string[] }> {
  const folder = join(stateDir, JOURNAL_FOLDER);
  const deadLetterFolder = join(stateDir, DEAD_LETTER_FOLDER);
  const journal = await readJournalFolder(folder, deadLetterFolder);
  const deadLetters = await readDeadLetterFolder(deadLetterFolder);
  return {
    pending: journal.entries.map(({ entry }) => entry),
    deadLetters: deadLetters.letters.map(({ letter }) => letter),
    corrupt: [
      ...journal.setAside,
      ...journal.corrupt.map(({ file }) => file),
      ...deadLetters.invalid.map(({ file }) => file),
    ],
  };
}

/**
 * Instants (ms) of requests the journal proves were sent: each record's claim (a poll answered it) and each
 * report attempt it counted; for a budget.json that claims fewer (see budget/store.ts).
 */
export function requestsShownByJournal(entries: readonly JournalEntry[]): number[] {
  const instants: number[] = [];
  for (const entry of entries) {
    const claimedAt = Date.parse(entry.claimedAt);
    if (Number.isNaN(claimedAt)) continue;
    instants.push(claimedAt);
    const reportedAt = entry.outcome ? Date.parse(entry.outcome.finishedAt) : claimedAt;
    for (let i = 0; i < entry.reportAttempts; i++)
      instants.push(Number.isNaN(reportedAt) ? claimedAt : reportedAt);
  }
  return instants;
}
