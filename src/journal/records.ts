// The journal's on-disk records and the checks that decide whether a file read back is one of them:
// anything written by another version, truncated or edited by hand is rejected with a reason.
import type { JsonObject, ReportStatus } from '../api/types.ts';

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

const PHASES: ReadonlySet<unknown> = new Set(['claimed', 'finished']);
const STATUSES: ReadonlySet<unknown> = new Set(['COMPLETED', 'FAILED']);

export function checkJournalEntry(value: unknown): Checked<JournalEntry> {
  if (!isObject(value)) return fail('not a JSON object');
  if (value.version !== 1)
    return fail(`unknown record version ${JSON.stringify(value.version) ?? 'undefined'}`);
  const problem =
    nonEmptyString(value, 'executionId') ??
    string(value, 'taskId') ??
    string(value, 'taskKey') ??
    (isObject(value.input) ? undefined : 'input is not an object') ??
    (value.createdAt === undefined ? undefined : string(value, 'createdAt')) ??
    string(value, 'claimedAt') ??
    (PHASES.has(value.phase) ? undefined : `unknown phase ${JSON.stringify(value.phase) ?? 'undefined'}`) ??
    count(value, 'reportAttempts') ??
    (value.starts === undefined ? undefined : count(value, 'starts')) ??
    checkOutcome(value);
  return problem === undefined ? { ok: true, value: value as unknown as JournalEntry } : fail(problem);
}

export function checkDeadLetter(value: unknown): Checked<DeadLetter> {
  if (!isObject(value)) return fail('not a JSON object');
  const entry = checkJournalEntry(value.entry);
  if (!entry.ok) return fail(`entry: ${entry.problem}`);
  const problem = string(value, 'deadAt') ?? checkAnswer(value.answer);
  return problem === undefined ? { ok: true, value: value as unknown as DeadLetter } : fail(problem);
}

function checkOutcome(record: JsonObject): string | undefined {
  if (record.phase === 'claimed') {
    return record.outcome === undefined ? undefined : 'a claimed record carries an outcome';
  }
  const outcome = record.outcome;
  if (!isObject(outcome)) return 'a finished record has no outcome object';
  if (!STATUSES.has(outcome.status)) return `outcome status ${JSON.stringify(outcome.status) ?? 'undefined'}`;
  if (!isObject(outcome.output)) return 'outcome output is not an object';
  return count(outcome, 'attempts') ?? string(outcome, 'finishedAt');
}

function checkAnswer(answer: unknown): string | undefined {
  if (!isObject(answer)) return 'answer is not an object';
  if (!Number.isInteger(answer.status)) return 'answer status is not an integer';
  if (answer.code !== undefined && typeof answer.code !== 'string') return 'answer code is not a string';
  if (answer.message !== undefined && typeof answer.message !== 'string')
    return 'answer message is not a string';
  return undefined;
}

function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function string(record: JsonObject, key: string): string | undefined {
  return typeof record[key] === 'string' ? undefined : `${key} is not a string`;
}

function nonEmptyString(record: JsonObject, key: string): string | undefined {
  const value = record[key];
  return typeof value === 'string' && value.length > 0 ? undefined : `${key} is not a non-empty string`;
}

function count(record: JsonObject, key: string): string | undefined {
  const value = record[key];
  return Number.isInteger(value) && (value as number) >= 0 ? undefined : `${key} is not a count`;
}

function fail(problem: string): { ok: false; problem: string } {
  return { ok: false, problem };
}
