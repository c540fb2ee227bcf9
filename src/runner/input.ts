// The input side of an execution: the service's `context` is split off (it is not one of the task's input keys)
// and the remaining input is checked against the task's declared inputKeys before the handler runs.
import type { JobContext, JsonObject, KeyDescription } from '../api/types.ts';

export interface SplitInput {
  /** The input the handler receives: everything but `context`. */
  input: JsonObject;
  /** `input.context`, or `{}` when absent or not an object. */
  job: JobContext;
}

export function splitInput(raw: unknown): SplitInput {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return { input: {}, job: {} };
  const { context, ...input } = raw as JsonObject;
  const job =
    typeof context === 'object' && context !== null && !Array.isArray(context) ? (context as JobContext) : {};
  return { input, job };
}

/** Declared keys that are absent or undefined in `input`, in declaration order. */
export function findMissingInputKeys(input: JsonObject, inputKeys: KeyDescription[]): string[] {
  return inputKeys.map((k) => k.key).filter((key) => !Object.hasOwn(input, key) || input[key] === undefined);
}

export function missingInputKeysMessage(missing: string[]): string {
  const noun = missing.length === 1 ? 'key' : 'keys';
  return `missing input ${noun} ${quoteList(missing)} (declared in the task inputKeys)`;
}

export function quoteList(keys: string[]): string {
  return keys.map((k) => `"${k}"`).join(', ');
}
