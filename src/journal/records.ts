// The journal's on-disk records and the checks that decide whether a file read back is one of them:
// anything written by another version, truncated or edited by hand is rejected with a reason.
import * as v from 'valibot';
import type { JsonObject, ReportStatus } from '../api/types.ts';
import { isPlainObject, plainObject } from '../schema/plain-object.ts';
import { record } from '../schema/record.ts';

// Not an ESM import: its namespace would read node:crypto's lazy webcrypto (see telemetry/http-server.ts).
const { createHash } = process.getBuiltinModule('node:crypto');

/** What the daemon knows about an execution the moment the service handed it over. */
export interface ClaimRecord {
  executionId: string;
  taskId: string;
  taskKey: string;
  input: JsonObject;
  /** The execution's createdAt as the service sent it. */
  createdAt?: string;
  /** ISO 8601 instant the daemon polled the execution. */
  claimedAt: string;
}

/** The result to report, kept until the service accepts it. */
export interface OutcomeRecord {
  status: ReportStatus;
  output: JsonObject;
  /** Handler attempts it took (1 when the first attempt settled it). */
  attempts: number;
  /** ISO 8601 instant the last attempt ended. */
  finishedAt: string;
}

/** One execution in the journal: claimed (handler not finished) or finished (outcome not yet accepted). */
export interface JournalEntry extends ClaimRecord {
  phase: 'claimed' | 'finished';
  /** Present when phase is 'finished'. */
  outcome?: OutcomeRecord;
  /** Reports (PATCH) sent for this outcome so far. */
  reportAttempts: number;
  /**
   * Runs of the handler begun for this execution (absent in records of older versions: 1). A record still
   * claimed at start means every one of them ended with the daemon dying: the poison execution guard.
   */
  starts?: number;
  version: 1;
}

/** An execution whose report the service refused for good, kept for an operator to look at. */
export interface DeadLetter {
  entry: JournalEntry;
  /** ISO 8601 instant it was given up. */
  deadAt: string;
  /** The service's final answer to the report. */
  answer: { status: number; code?: string; message?: string };
}

/** Either the checked value or why it is not one. */
export type Checked<T> = { ok: true; value: T } | { ok: false; problem: string };

const json = (value: unknown): string => JSON.stringify(value) ?? 'undefined';
const string = (key: string) => v.string(`${key} is not a string`);
const count = (key: string) =>
  v.pipe(
    v.number(`${key} is not a count`),
    v.integer(`${key} is not a count`),
    v.minValue(0, `${key} is not a count`),
  );

const entrySchema = record(
  {
    version: v.literal(1, (issue) => `unknown record version ${json(issue.input)}`),
    executionId: v.pipe(
      v.string('executionId is not a non-empty string'),
      v.nonEmpty('executionId is not a non-empty string'),
    ),
    taskId: string('taskId'),
    taskKey: string('taskKey'),
    input: plainObject('input is not an object'),
    createdAt: v.optional(string('createdAt')),
    claimedAt: string('claimedAt'),
    phase: v.picklist(['claimed', 'finished'], (issue) => `unknown phase ${json(issue.input)}`),
    reportAttempts: count('reportAttempts'),
    starts: v.optional(count('starts')),
    outcome: v.optional(v.unknown()),
  },
  () => 'not a JSON object',
);

const outcomeSchema = record(
  {
    status: v.picklist(['COMPLETED', 'FAILED'], (issue) => `outcome status ${json(issue.input)}`),
    output: plainObject('outcome output is not an object'),
    attempts: count('attempts'),
    finishedAt: string('finishedAt'),
  },
  () => 'a finished record has no outcome object',
);

const deadLetterSchema = record(
  {
    deadAt: string('deadAt'),
    answer: record(
      {
        status: v.pipe(
          v.number('answer status is not an integer'),
          v.integer('answer status is not an integer'),
        ),
        code: v.optional(v.string('answer code is not a string')),
        message: v.optional(v.string('answer message is not a string')),
      },
      () => 'answer is not an object',
    ),
  },
  () => 'not a JSON object',
);

export function checkJournalEntry(value: unknown): Checked<JournalEntry> {
  const problem =
    firstProblem(entrySchema, value) ??
    // The outcome's presence depends on the phase, read once the rest is known to be sound.
    ((value as { phase: string }).phase === 'claimed'
      ? (value as { outcome?: unknown }).outcome === undefined
        ? undefined
        : 'a claimed record carries an outcome'
      : firstProblem(outcomeSchema, (value as { outcome?: unknown }).outcome));
  return problem === undefined ? { ok: true, value: value as JournalEntry } : { ok: false, problem };
}

export function checkDeadLetter(value: unknown): Checked<DeadLetter> {
  if (!isPlainObject(value)) return { ok: false, problem: 'not a JSON object' };
  // The entry is checked on its own, so that its problem reads `entry: ...`.
  const entry = checkJournalEntry(value.entry);
  if (!entry.ok) return { ok: false, problem: `entry: ${entry.problem}` };
  const problem = firstProblem(deadLetterSchema, value);
  return problem === undefined ? { ok: true, value: value as unknown as DeadLetter } : { ok: false, problem };
}

/**
 * The text of a record file: the entry and, last, a SHA-256 of its compact JSON, so that bytes which still
 * parse but differ from what was written (a flipped bit, a hand edit) are caught rather than trusted.
 */
export function serializeJournalEntry(entry: JournalEntry): string {
  return `${JSON.stringify({ ...entry, checksum: entryChecksum(entry) }, null, 2)}\n`;
}

/** How a record file read back came to be what it is. */
export type RecordOrigin =
  /** Written by this release: its checksum matches. */
  | 'current'
  /** Written by a release before checksums (d0010c7): none to check; the next write adds one. */
  | 'unchecked-release'
  /**
   * Written by this release, then advanced by a release before checksums, which spreads the entry it read
   * (`{ ...entry, reportAttempts: n + 1 }`) and so carries the old checksum along: it matches an earlier
   * state of this very record, one those steps lead from.
   */
  | 'stale-checksum';

/**
 * Checks a parsed record file: the entry's shape, then its checksum when it has one. Records of releases
 * before checksums are read as they are, including those whose stale checksum an older release carried along
 * (see RecordOrigin); any other mismatch is damage. The entry returned carries no checksum.
 */
export function checkJournalRecord(
  value: unknown,
): { ok: true; value: JournalEntry; origin: RecordOrigin } | { ok: false; problem: string } {
  const checked = checkJournalEntry(value);
  if (!checked.ok) return checked;
  const { checksum, ...entry } = checked.value as JournalEntry & { checksum?: unknown };
  if (checksum === undefined) return { ok: true, value: entry, origin: 'unchecked-release' };
  if (typeof checksum !== 'string') return { ok: false, problem: 'checksum is not a string' };
  // JSON.parse keeps the members in the order they were written, so the same entry gives the same text.
  if (checksum === entryChecksum(entry)) return { ok: true, value: entry, origin: 'current' };
  const keys = Object.keys(value as object);
  const outcomeAfterChecksum = keys.indexOf('outcome') > keys.indexOf('checksum');
  for (const earlier of earlierStates(entry, outcomeAfterChecksum)) {
    if (checksum === entryChecksum(earlier)) return { ok: true, value: entry, origin: 'stale-checksum' };
  }
  return { ok: false, problem: 'its checksum does not match its content (changed after it was written)' };
}

/** At most this many earlier states are tried: an older release counts one report attempt per write. */
const EARLIER_STATES_LIMIT = 1000;

/**
 * The states a record may have had when this release last wrote it, if a release before checksums advanced
 * it since: that release only counts starts (while claimed), adds the outcome (a member it appends, so after
 * the checksum), and counts report attempts (once finished). Members keep their order.
 */
function* earlierStates(entry: JournalEntry, outcomeAppended: boolean): Generator<JournalEntry> {
  const starts = entry.starts;
  const startsRange = (from: JournalEntry) => {
    const states: JournalEntry[] = [];
    if (starts === undefined) return states;
    for (let s = starts - 1; s >= 1 && states.length < EARLIER_STATES_LIMIT; s--)
      states.push({ ...from, starts: s });
    return states;
  };
  if (entry.phase === 'finished' && outcomeAppended) {
    // Claimed when this release wrote it: no report attempt yet, and perhaps fewer starts.
    const claimed: JournalEntry = { ...entry, phase: 'claimed', reportAttempts: 0 };
    delete claimed.outcome;
    yield claimed;
    yield* startsRange(claimed);
    return;
  }
  if (entry.phase === 'claimed') {
    yield* startsRange(entry);
    return;
  }
  const lowest = Math.max(0, entry.reportAttempts - EARLIER_STATES_LIMIT);
  for (let r = entry.reportAttempts - 1; r >= lowest; r--) yield { ...entry, reportAttempts: r };
}

function entryChecksum(entry: JournalEntry): string {
  return createHash('sha256').update(JSON.stringify(entry)).digest('hex');
}

function firstProblem(schema: v.GenericSchema, value: unknown): string | undefined {
  const result = v.safeParse(schema, value, { abortEarly: true });
  return result.success ? undefined : result.issues[0].message;
}
