// Where the budget survives restarts: a small JSON file in the state folder, written durably, holding the
// month's usage and the send instants of the last minute (so a restart cannot overrun the service's windows).
import path from 'node:path';
import { readJsonFile, writeFileDurably } from '../journal/durable-file.ts';
import { parseMonthKey } from './month.ts';

export interface BudgetState {
  /** `YYYY-MM` in the budget's time zone. */
  monthKey: string;
  /** Requests of that month, written ahead of use: never less than were sent. */
  used: number;
  /**
   * Send instants (ms since the epoch, oldest first) of the requests of the last minute plus the safety margin.
   * Written before the requests are let through, each is the latest instant its request may leave at, never
   * an earlier one. Absent from files written by versions that did not keep the windows.
   */
  sentAt?: number[];
}

export interface BudgetStore {
  /** Undefined when nothing was saved yet; throws when a saved state cannot be read. */
  load(): Promise<BudgetState | undefined>;
  save(state: BudgetState): Promise<void>;
}

export function memoryBudgetStore(initial?: BudgetState): BudgetStore {
  let state = initial && copy(initial);
  return {
    load: () => Promise.resolve(state && copy(state)),
    save: (next) => {
      state = copy(next);
      return Promise.resolve();
    },
  };
}

/** A copy that shares no array with the caller, as a file would not. */
function copy(state: BudgetState): BudgetState {
  return state.sentAt === undefined ? { ...state } : { ...state, sentAt: [...state.sentAt] };
}

export function fileBudgetStore(stateDir: string): BudgetStore {
  const file = path.join(stateDir, 'budget.json');
  return {
    async load() {
      const raw = await readJsonFile(file);
      if (raw === undefined) return undefined;
      const state = asBudgetState(raw);
      if (!state) throw new BudgetStateError(file);
      return state;
    },
    save: (state) => writeFileDurably(file, `${JSON.stringify(state)}\n`),
  };
}

/** A budget file that is valid JSON but not a month's usage: damaged, or written by something else. */
export class BudgetStateError extends Error {
  readonly file: string;

  constructor(file: string) {
    super(
      `${file} does not hold a month's budget usage ({"monthKey": "YYYY-MM", "used": whole number >= 0, ` +
        '"sentAt": optional list of instants in ms}); usage is estimated instead, the windows are taken as full ' +
        'at start, and the file is rewritten with the next request',
    );
    this.name = 'BudgetStateError';
    this.file = file;
  }
}

function asBudgetState(raw: unknown): BudgetState | undefined {
  if (typeof raw !== 'object' || raw === null) return undefined;
  const { monthKey, used, sentAt } = raw as Partial<Record<keyof BudgetState, unknown>>;
  if (typeof monthKey !== 'string' || parseMonthKey(monthKey) === undefined) return undefined;
  if (typeof used !== 'number' || !Number.isSafeInteger(used) || used < 0) return undefined;
  if (sentAt === undefined) return { monthKey, used };
  if (!Array.isArray(sentAt) || !sentAt.every(isInstant)) return undefined;
  return { monthKey, used, sentAt: sentAt as number[] };
}

function isInstant(value: unknown): boolean {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0;
}
