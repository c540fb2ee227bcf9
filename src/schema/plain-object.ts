// The one test of "a JSON object" for outside data (service answers, journal files, request bodies, handler
// results): not null, not an array, made by `{}`/JSON.parse (no class instance that JSON would flatten).
import * as v from 'valibot';

/** True for an object whose prototype is Object.prototype or null (what JSON.parse makes for `{...}`). */
export function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/** A schema for a plain object of any members; `message` may depend on what was given instead. */
export function plainObject<T extends Record<string, unknown> = Record<string, unknown>>(
  message: v.ErrorMessage<v.CustomIssue>,
): v.CustomSchema<T, v.ErrorMessage<v.CustomIssue> | undefined> {
  return v.custom<T>(isPlainObject, message);
}
