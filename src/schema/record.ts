// Object schemas whose every problem reads as the member's own message, a missing member included, and the
// path of an issue as users write it (`data[2].key`, `inputKeys[0].description`).
import * as v from 'valibot';

type Message = (issue: v.BaseIssue<unknown>) => string;

/**
 * `v.object` (unknown members ignored) with two differences: an array is not an object, and a missing member
 * is worded by its own schema, as if it had been given `undefined` (valibot words it with the object's message).
 */
export function record<const E extends v.ObjectEntries>(entries: E, message: Message) {
  return v.pipe(
    v.custom<Record<string, unknown>>(isObject, message),
    v.object(entries, (issue) => missingMemberMessage(entries, issue) ?? message(issue)),
  );
}

/** Any object but an array: class instances included (a task spec may be one), unlike `isPlainObject`. */
function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function missingMemberMessage(entries: v.ObjectEntries, issue: v.BaseIssue<unknown>): string | undefined {
  const last = issue.path?.at(-1);
  if (last?.origin !== 'key' || typeof last.key !== 'string') return undefined;
  const member: unknown = entries[last.key];
  const own =
    typeof member === 'object' && member !== null && 'message' in member ? member.message : undefined;
  if (typeof own === 'function') return (own as Message)({ ...issue, input: undefined, path: undefined });
  return typeof own === 'string' ? own : undefined;
}

/** The issue's location, e.g. `data[2].key`; `''` for the value itself. */
export function issuePath(issue: v.BaseIssue<unknown>): string {
  let path = '';
  for (const item of issue.path ?? []) {
    const key: unknown = item.key;
    if (typeof key === 'number') path += `[${key}]`;
    else path += path === '' ? String(key) : `.${String(key)}`;
  }
  return path;
}

/** The first issue of parsing `value`, or undefined when it matches (for validators that name one problem). */
export function firstIssue(schema: v.GenericSchema, value: unknown): v.BaseIssue<unknown> | undefined {
  const result = v.safeParse(schema, value, { abortEarly: true });
  return result.success ? undefined : result.issues[0];
}
