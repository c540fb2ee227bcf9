// `--variable ID=VALUE` of `dev`, `run` and `emulator`: variables the embedded emulator holds before anything
// runs, so that a handler's `ctx.service.variables.get(ID)` finds one. A handler names a variable by its id,
// so ID is the id (and the key and name too).
import type { NewVariable } from '../emulator/types.ts';

/** The variables of every `--variable ID=VALUE` given, or what is wrong with one of them. */
export function parseVariableOptions(given: readonly string[] | undefined): NewVariable[] | string {
  const variables: NewVariable[] = [];
  for (const option of given ?? []) {
    const equals = option.indexOf('=');
    const id = equals < 0 ? '' : option.slice(0, equals);
    if (id.trim() === '') {
      return `--variable takes ID=VALUE (the id a handler passes to ctx.service.variables.get), got "${option}"`;
    }
    if (variables.some((variable) => variable.id === id)) return `--variable ${id} is given twice`;
    variables.push({ id, key: id, value: option.slice(equals + 1) });
  }
  return variables;
}
