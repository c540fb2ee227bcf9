// `df-worker journal`: a read-only look at the state folder: executions still owed to the service, the ones
// given up on (dead letters) and corrupt files. Safe to run beside a live daemon: it moves and writes nothing.
import { stat } from 'node:fs/promises';
import path from 'node:path';
import { ConfigError } from '../../config/errors.ts';
import { loadConfig } from '../../config/load.ts';
import { describeError } from '../../errors/catalogue.ts';
import { errorCode } from '../../journal/durable-file.ts';
import { DEAD_LETTER_FOLDER, JOURNAL_FOLDER } from '../../journal/journal-folder.ts';
import type { DeadLetter, JournalEntry } from '../../journal/journal.ts';
import { describeJournal } from '../../journal/journal-contents.ts';
import { wantsHelp, type Command, parseCommandArgs } from '../command.ts';
import { EXIT_CONFIG, EXIT_FAILURE, EXIT_OK } from '../../errors/exit-codes.ts';

export type JournalDescription = Awaited<ReturnType<typeof describeJournal>>;

/** The human view of a journal: one table of pending executions, one of dead letters, the corrupt files. */
export function formatJournal(stateDir: string, journal: JournalDescription): string {
  const lines = [`journal at ${stateDir}`, '', `pending executions: ${journal.pending.length}`];
  if (journal.pending.length > 0) {
    lines.push(
      ...table([
        ['ID', 'TASK', 'PHASE', 'CLAIMED AT', 'REPORT ATTEMPTS'],
        ...journal.pending.map(pendingRow),
      ]),
    );
  }
  lines.push('', `dead letters: ${journal.deadLetters.length}`);
  if (journal.deadLetters.length > 0) {
    lines.push(
      ...table([['ID', 'TASK', 'DEAD AT', "SERVICE'S ANSWER"], ...journal.deadLetters.map(deadLetterRow)]),
    );
  }
  lines.push('', `corrupt files: ${journal.corrupt.length}`, ...journal.corrupt.map((file) => `  ${file}`));
  return `${lines.join('\n')}\n`;
}

function pendingRow(entry: JournalEntry): string[] {
  const phase = entry.outcome === undefined ? entry.phase : `${entry.phase} (${entry.outcome.status})`;
  return [entry.executionId, entry.taskKey, phase, entry.claimedAt, String(entry.reportAttempts)];
}

function deadLetterRow(letter: DeadLetter): string[] {
  const { status, code, message } = letter.answer;
  const answer = `${status}${code === undefined ? '' : ` ${code}`}${message === undefined ? '' : `: ${message}`}`;
  return [letter.entry.executionId, letter.entry.taskKey, letter.deadAt, answer];
}

/** Rows as left-aligned columns, indented by two spaces; the last column is not padded. */
function table(rows: string[][]): string[] {
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => row[column]?.length ?? 0)));
  return rows.map(
    (row) =>
      `  ${row.map((cell, column) => (column === row.length - 1 ? cell : cell.padEnd(widths[column]!))).join('  ')}`,
  );
}

/** False when neither of the journal's folders exists: no daemon ever ran with this state folder. */
async function hasJournal(stateDir: string): Promise<boolean> {
  for (const folder of [JOURNAL_FOLDER, DEAD_LETTER_FOLDER]) {
    try {
      await stat(path.join(stateDir, folder));
      return true;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
  }
  return false;
}

export const journalCommand: Command = {
  name: 'journal',
  summary: 'show the executions the state folder still owes the service, and the dead letters',
  help: `
Usage: df-worker journal [--state-dir DIR] [--json]

Shows, without changing anything, what the journal in the state folder holds: executions claimed and not yet
reported (phase claimed: the handler had not finished; finished: the outcome is waiting to be reported), with
when they were claimed and how many reports were sent; dead letters (executions whose report the service
refused for good, with its answer); corrupt files. A daemon started on this folder replays the pending ones.

Options:
  --state-dir DIR   state folder (default: DF_STATE_DIR, else ./.state)
  --json            print the raw records as JSON (inputs and outputs included)
  -h, --help        this help
`,
  async run(argv) {
    if (wantsHelp(argv, this)) return EXIT_OK;
    const parsed = parseCommandArgs('journal', {
      args: argv,
      options: { 'state-dir': { type: 'string' }, json: { type: 'boolean', default: false } },
    });
    if (typeof parsed === 'number') return parsed;
    const { values } = parsed;
    let stateDir = values['state-dir'];
    if (stateDir === undefined) {
      try {
        stateDir = loadConfig({ require: 'none' }).state.dir;
      } catch (error) {
        if (!(error instanceof ConfigError)) throw error;
        process.stderr.write(`df-worker journal: ${describeError(error)}\n`);
        return EXIT_CONFIG;
      }
    }
    stateDir = path.resolve(stateDir);

    let journal: JournalDescription;
    try {
      if (!(await hasJournal(stateDir))) {
        // With --json, stdout stays parseable: the empty structure there, the note on stderr.
        if (values.json) {
          process.stderr.write(`no journal at ${stateDir}\n`);
          process.stdout.write(`${JSON.stringify({ pending: [], deadLetters: [], corrupt: [] })}\n`);
        } else {
          process.stdout.write(`no journal at ${stateDir}\n`);
        }
        return EXIT_OK;
      }
      journal = await describeJournal(stateDir);
    } catch (error) {
      const code = errorCode(error);
      if (code === undefined) throw error;
      process.stderr.write(
        `df-worker journal: cannot read the journal in ${stateDir} (${code}); check the folder's permissions\n`,
      );
      return EXIT_FAILURE;
    }
    process.stdout.write(
      values.json ? `${JSON.stringify(journal, null, 2)}\n` : formatJournal(stateDir, journal),
    );
    return EXIT_OK;
  },
};
