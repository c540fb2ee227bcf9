// Where the month's usage survives restarts: a small JSON file in the state folder, written durably.
import path from 'node:path';
import { readJsonFile, writeFileDurably } from '../journal/durable-file.ts';

export interface BudgetState {
  monthKey: string;
  used: number;
}

export interface BudgetStore {
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
      if (
        typeof raw === 'object' &&
        raw !== null &&
        typeof (raw as BudgetState).monthKey === 'string' &&
        Number.isInteger((raw as BudgetState).used)
      ) {
        return { monthKey: (raw as BudgetState).monthKey, used: (raw as BudgetState).used };
      }
      return undefined;
    },
    save: (state) => writeFileDurably(file, `${JSON.stringify(state)}\n`),
  };
}
