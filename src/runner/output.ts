// Checks a handler's result before it is reported: a plain JSON object holding every declared output key.
// A bad result is a handler bug, so the runner fails the execution at once instead of retrying it.
import type { JsonObject, KeyDescription } from '../api/types.ts';
import { isPlainObject } from '../schema/plain-object.ts';
import { summariseError, truncateMessage } from './errors.ts';
import { quoteList } from './input.ts';

export type OutputCheck =
  /** `output` is a JSON-safe copy: undefined members dropped, `toJSON` applied (Date becomes a string). */
  | { ok: true; output: JsonObject; undeclaredKeys: string[] }
  | { ok: false; message: string; missingOutputKeys?: string[] };

/**
 * Never throws: whatever the handler returned (getters, toJSON or proxy traps that throw included) gives a check.
 * With `maxBytes` (DF_HANDLER_MAX_OUTPUT_BYTES), an output whose JSON is larger fails the check: the daemon
 * would hold several copies of it (journal, report body) and the service may refuse it anyway.
 */
export function checkOutput(value: unknown, outputKeys: KeyDescription[], maxBytes?: number): OutputCheck {
  let output: JsonObject;
  try {
    if (!isPlainObject(value)) {
      const hint = value === undefined ? '; did the handler forget to return its result?' : '';
      return {
        ok: false,
        message: `handler output must be a plain JSON object, got ${describe(value)}${hint}`,
      };
    }
    output = toJsonObject(value, '', new Set());
  } catch (error) {
    return { ok: false, message: truncateMessage(conversionFailure(error)) };
  }

  if (maxBytes !== undefined) {
    const bytes = jsonBytes(output, maxBytes);
    if (bytes > maxBytes) return { ok: false, message: outputTooLargeMessage(bytes, maxBytes) };
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

function outputTooLargeMessage(bytes: number, maxBytes: number): string {
  return (
    `handler output is at least ${bytes} bytes as JSON, over the ${maxBytes}-byte output limit ` +
    '(DF_HANDLER_MAX_OUTPUT_BYTES); return a reference to large data (a file, a URL) instead'
  );
}

/**
 * The size of `output` as JSON text in UTF-8 bytes; past `maxBytes`, possibly a smaller figure that is still
 * past it. Counted without escapes first, so an output far too large is never serialised (its copy alone could
 * take the memory the limit guards).
 */
function jsonBytes(output: JsonObject, maxBytes: number): number {
  const atLeast = unescapedBytes(output);
  return atLeast > maxBytes ? atLeast : Buffer.byteLength(JSON.stringify(output));
}

/** JSON size with strings counted unescaped: never more than the real size. */
function unescapedBytes(value: unknown): number {
  if (typeof value === 'string') return Buffer.byteLength(value) + 2;
  if (Array.isArray(value)) {
    let bytes = 2 + Math.max(0, value.length - 1);
    for (const item of value) bytes += unescapedBytes(item);
    return bytes;
  }
  if (typeof value === 'object' && value !== null) {
    const keys = Object.keys(value);
    let bytes = 2 + Math.max(0, keys.length - 1);
    for (const key of keys) {
      bytes += Buffer.byteLength(key) + 3 + unescapedBytes((value as Record<string, unknown>)[key]);
    }
    return bytes;
  }
  return String(value).length;
}

class NotJsonError extends Error {}

/** Reading part of the result threw (a getter, a toJSON, a proxy trap): handler code failed, at `path`. */
class UnreadableOutputError extends Error {
  readonly path: string;
  readonly reason: unknown;

  constructor(path: string, reason: unknown) {
    super(`handler output could not be read at "${path}"`);
    this.path = path;
    this.reason = reason;
  }
}

function conversionFailure(error: unknown): string {
  if (error instanceof NotJsonError) return `handler output is not JSON: ${error.message}`;
  // Anything else was thrown by the handler's own code while its result was read, or is a stack overflow on
  // output nested too deeply; either way the output cannot be reported.
  const reason = summariseError(error instanceof UnreadableOutputError ? error.reason : error).message;
  const where = error instanceof UnreadableOutputError && error.path !== '' ? ` at "${error.path}"` : '';
  return `handler output could not be read${where}: ${reason}`;
}

/** Runs one read of the handler's result, blaming `path` when it throws. */
function read<T>(path: string, readValue: () => T): T {
  try {
    return readValue();
  } catch (error) {
    throw new UnreadableOutputError(path, error);
  }
}

function toJsonObject(value: object, path: string, ancestors: Set<object>): JsonObject {
  ancestors.add(value);
  const copy: JsonObject = {};
  for (const key of read(path, () => Object.keys(value))) {
    const memberPath = path === '' ? key : `${path}.${key}`;
    const member = read(memberPath, () => (value as Record<string, unknown>)[key]);
    const converted = toJsonValue(member, key, memberPath, ancestors);
    // Matches JSON.stringify: an undefined member (or one whose toJSON gives undefined) is simply left out.
    // defineProperty, not assignment: a "__proto__" key (JSON.parse makes one) must stay a member.
    if (converted !== undefined) {
      Object.defineProperty(copy, key, {
        value: converted,
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
  }
  ancestors.delete(value);
  return copy;
}

function toJsonArray(array: unknown[], path: string, ancestors: Set<object>): unknown[] {
  ancestors.add(array);
  const copy: unknown[] = [];
  const length = read(path, () => array.length);
  for (let index = 0; index < length; index++) {
    const itemPath = `${path}[${index}]`;
    const item = read(itemPath, () => array[index]);
    // Matches JSON.stringify: undefined (and a hole) in an array becomes null.
    copy.push(toJsonValue(item, String(index), itemPath, ancestors) ?? null);
  }
  ancestors.delete(array);
  return copy;
}

/** Applies `toJSON` once, as JSON.stringify does: the value it returns is converted without its own `toJSON`. */
function toJsonValue(value: unknown, key: string, path: string, ancestors: Set<object>): unknown {
  if (typeof value === 'object' && value !== null) {
    const toJSON = read(path, () => (value as { toJSON?: unknown }).toJSON);
    if (typeof toJSON === 'function') {
      return toJsonValueAsIs(
        read(path, () => toJSON.call(value, key) as unknown),
        path,
        ancestors,
      );
    }
  }
  return toJsonValueAsIs(value, path, ancestors);
}

function toJsonValueAsIs(value: unknown, path: string, ancestors: Set<object>): unknown {
  switch (typeof value) {
    case 'string':
    case 'boolean':
    case 'undefined':
      return value;
    case 'number':
      if (Number.isFinite(value)) return value;
      throw new NotJsonError(`"${path}" is ${value}, which JSON cannot represent`);
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
  if (read(path, () => Array.isArray(object))) return toJsonArray(object as unknown[], path, ancestors);
  if (read(path, () => isPlainObject(object))) return toJsonObject(object, path, ancestors);
  throw new NotJsonError(
    `"${path}" is ${read(path, () => describe(object))}, which JSON would flatten to {}; ` +
      'convert it to a plain object or array',
  );
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (value === undefined) return 'undefined';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'object') return `an instance of ${value.constructor?.name ?? 'an unknown class'}`;
  return `a ${typeof value}`;
}
