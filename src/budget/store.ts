// Where the month's usage survives restarts: a small JSON file in the state folder, written durably.
import path from 'node:path';
import { readJsonFile, writeFileDurably } from '../journal/durable-file.ts';
import { parseMonthKey } from './month.ts';

export interface BudgetState {
  monthKey: string;
  used: number;
}

export interface BudgetStore {
  /** Undefined when nothing was saved yet; throws when a saved state cannot be read. */
  load(): Promise<BudgetState | undefined>;
  save(state: BudgetState): Promise<void>;
}

export function memoryBudgetStore(initial?: BudgetState): BudgetStore {
  let state = initial;
  return {
    load: () => Promise.resolve(state),
    save: (next) => {
      state = { ...next };
      return Promise.resolve();
    },
  };
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
      `${file} does not hold a month's budget usage ({"monthKey": "YYYY-MM", "used": whole number >= 0}); ` +
        'usage is estimated instead, and the file is rewritten with the next count',
    );
    this.name = 'BudgetStateError';
    this.file = file;
  }
}

function asBudgetState(raw: unknown): BudgetState | undefined {
  if (typeof raw !== 'object' || raw === null) return undefined;
  const { monthKey, used } = raw as Partial<Record<keyof BudgetState, unknown>>;
  if (typeof monthKey !== 'string' || parseMonthKey(monthKey) === undefined) return undefined;
  if (typeof used !== 'number' || !Number.isSafeInteger(used) || used < 0) return undefined;
  return { monthKey, used };
}
