// Checks a handler's result before it is reported: a plain JSON object holding every declared output key.
// A bad result is a handler bug, so the runner fails the execution at once instead of retrying it.
import type { JsonObject, KeyDescription } from '../api/types.ts';
import { quoteList } from './input.ts';

export type OutputCheck =
  /** `output` is a JSON-safe copy: undefined members dropped, `toJSON` applied (Date becomes a string). */
  | { ok: true; output: JsonObject; undeclaredKeys: string[] }
  | { ok: false; message: string; missingOutputKeys?: string[] };

export function checkOutput(value: unknown, outputKeys: KeyDescription[]): OutputCheck {
  if (!isPlainObject(value)) {
    const hint = value === undefined ? '; did the handler forget to return its result?' : '';
    return {
      ok: false,
      message: `handler output must be a plain JSON object, got ${describe(value)}${hint}`,
    };
  }
  let output: JsonObject;
  try {
    output = toJsonObject(value, '', new Set());
  } catch (error) {
    if (!(error instanceof NotJsonError)) throw error;
    return { ok: false, message: `handler output is not JSON: ${error.message}` };
  }

  const declared = outputKeys.map((k) => k.key);
  const missing = declared.filter((key) => !Object.hasOwn(output, key));
  if (missing.length > 0) {
    const noun = missing.length === 1 ? 'key' : 'keys';
    return {
      ok: false,
      message: `handler output lacks declared ${noun} ${quoteList(missing)}`,
      missingOutputKeys: missing,
    };
  }
  const declaredSet = new Set(declared);
  return { ok: true, output, undeclaredKeys: Object.keys(output).filter((key) => !declaredSet.has(key)) };
}

class NotJsonError extends Error {}

function toJsonObject(value: Record<string, unknown>, path: string, ancestors: Set<object>): JsonObject {
  ancestors.add(value);
  const copy: JsonObject = {};
  for (const [key, member] of Object.entries(value)) {
    // Matches JSON.stringify: an undefined member is simply left out.
    if (member === undefined) continue;
    copy[key] = toJsonValue(member, path === '' ? key : `${path}.${key}`, ancestors);
  }
  ancestors.delete(value);
  return copy;
}

function toJsonValue(value: unknown, path: string, ancestors: Set<object>): unknown {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return value;
    case 'number':
      if (Number.isFinite(value)) return value;
      throw new NotJsonError(`"${path}" is ${value}, which JSON cannot represent`);
    case 'undefined':
      // Only reachable inside arrays, where JSON.stringify writes null.
      return null;
    case 'bigint':
    case 'symbol':
    case 'function':
      throw new NotJsonError(
        `"${path}" is a ${typeof value}; convert it to a string, number or plain object`,
      );
  }
  if (value === null) return null;
  const object = value as object;
  if (ancestors.has(object)) throw new NotJsonError(`"${path}" refers back to an enclosing object (a cycle)`);
  if (Array.isArray(object)) {
    ancestors.add(object);
    const copy = object.map((item: unknown, index) => toJsonValue(item, `${path}[${index}]`, ancestors));
    ancestors.delete(object);
    return copy;
  }
  const toJSON = (object as { toJSON?: unknown }).toJSON;
  if (typeof toJSON === 'function') {
    const key = path.slice(path.lastIndexOf('.') + 1);
    return toJsonValue(toJSON.call(object, key) as unknown, path, ancestors);
  }
  if (isPlainObject(object)) return toJsonObject(object, path, ancestors);
  throw new NotJsonError(
    `"${path}" is ${describe(object)}, which JSON would flatten to {}; convert it to a plain object or array`,
  );
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null) return false;
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (value === undefined) return 'undefined';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'object') return `an instance of ${value.constructor?.name ?? 'an unknown class'}`;
  return `a ${typeof value}`;
}
