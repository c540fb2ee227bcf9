// The emulator's variables, each with the version its ETag names: the service's create, get, list and update,
// plus the create-with-id and delete only local tools use.
import type { Clock } from '../clock/clock.ts';
import type { Variable } from '../api/types.ts';
import type { VariableChanges } from './types.ts';

/** A variable as the emulator keeps it: the record and its version, answered as the quoted ETag `"<version>"`. */
export interface EmulatedVariable {
  variable: Variable;
  version: number;
}

/** A copy of the stored variable with its version as the ETag the service would send (`"1"` first). */
export function versioned(stored: EmulatedVariable): Variable & { etag: string } {
  return { ...structuredClone(stored.variable), etag: `"${stored.version}"` };
}

export class VariableStore {
  readonly #clock: Clock;
  // Insertion order is creation order: lists rely on it.
  readonly #variables = new Map<string, EmulatedVariable>();
  #sequence = 0;

  constructor(clock: Clock) {
    this.#clock = clock;
  }

  /** Adds a variable at version 1 under the next `variable-N` that no variable has (the service's create). */
  create(changes: VariableChanges): EmulatedVariable {
    let id: string;
    do id = `variable-${++this.#sequence}`;
    while (this.#variables.has(id));
    return this.#add(id, changes);
  }

  /**
   * Adds a variable at version 1 under an id of the caller's (`df-worker dev --variable`, so that a handler's
   * `ctx.service.variables.get(id)` finds it); undefined when a variable has that id already.
   */
  createWithId(id: string, changes: VariableChanges): EmulatedVariable | undefined {
    return this.#variables.has(id) ? undefined : this.#add(id, changes);
  }

  #add(id: string, changes: VariableChanges): EmulatedVariable {
    const variable: Variable = { object: 'variable', id, createdAt: this.#isoNow(), ...changes };
    const stored = { variable, version: 1 };
    this.#variables.set(id, stored);
    return stored;
  }

  /** Every variable, in creation order. */
  list(): Variable[] {
    return [...this.#variables.values()].map((stored) => stored.variable);
  }

  /** Every variable with its version, in creation order. */
  stored(): EmulatedVariable[] {
    return [...this.#variables.values()];
  }

  get(id: string): EmulatedVariable | undefined {
    return this.#variables.get(id);
  }

  /** The service documents no delete of a variable: the emulator's admin surface has one for local tools. */
  delete(id: string): boolean {
    return this.#variables.delete(id);
  }

  /** Applies the update and raises the version; undefined when no variable has this id. */
  update(id: string, changes: VariableChanges): EmulatedVariable | undefined {
    const stored = this.#variables.get(id);
    if (!stored) return undefined;
    stored.variable = { ...stored.variable, ...changes, updatedAt: this.#isoNow() };
    stored.version++;
    return stored;
  }

  /** Drops every variable and restarts ids at `variable-1`. */
  reset(): void {
    this.#variables.clear();
    this.#sequence = 0;
  }

  #isoNow(): string {
    return new Date(this.#clock.now()).toISOString();
  }
}
