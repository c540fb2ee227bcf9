// The configuration's values before they are checked: the schema's defaults, each JSON file merged in, the
// environment above the files, the command's options above everything; text coerced per format as it comes.
import { isPlainObject } from '../schema/plain-object.ts';
import type { ConfigProblem } from './errors.ts';
import { coerce } from './formats.ts';
import { listSettings, schema } from './schema.ts';
import type { Setting } from './schema.ts';

/** A schema node: a group of settings (`api`), a setting (`api.url`), or nothing (a name df-worker does not know). */
type SchemaNode = { [name: string]: SchemaNode } | Setting<unknown> | undefined;

const SETTINGS = listSettings();

function isSetting(node: SchemaNode): node is Setting<unknown> {
  return node !== undefined && 'env' in node && 'default' in node;
}

/** A name that would reach Object.prototype through a JSON file or an option. */
function isPrototypeKey(name: string, value?: unknown): boolean {
  return (
    name === '__proto__' ||
    (name === 'constructor' && isPlainObject(value) && Object.hasOwn(value, 'prototype'))
  );
}

/**
 * The values from every layer, lowest first: `files` in order, then `env`, then `overrides` (dotted names).
 * An override that cannot be placed (below a setting, `concurrency.x`) is a problem; nothing else is checked.
 */
export function layerValues(
  files: Record<string, unknown>[],
  env: NodeJS.ProcessEnv,
  overrides: Record<string, unknown>,
): { values: Record<string, unknown>; problems: ConfigProblem[] } {
  const values: Record<string, unknown> = {};
  for (const { setting, entry } of SETTINGS) place(values, setting, structuredClone(entry.default));
  for (const file of files) merge(file, values, schema);
  for (const { setting, entry } of SETTINGS) {
    const text = env[entry.env];
    // A group given something other than an object in a file leaves nowhere to put it; that is reported.
    if (text !== undefined) place(values, setting, coerce(entry.format, text));
  }
  const problems: ConfigProblem[] = [];
  for (const [setting, value] of Object.entries(overrides)) {
    if (value === undefined) continue;
    const node = setting.split('.').reduce<SchemaNode>((parent, name) => childOf(parent, name), schema);
    if (!place(values, setting, isSetting(node) ? coerce(node.format, value) : value)) {
      problems.push({ setting, message: 'is not a setting df-worker knows (from the command-line options)' });
    }
  }
  return { values, problems };
}

function childOf(node: SchemaNode, name: string): SchemaNode {
  return node === undefined || isSetting(node) || !Object.hasOwn(node, name) ? undefined : node[name];
}

/** Merges a file's values in: objects member by member, anything else (arrays included) replacing what was there. */
function merge(from: Record<string, unknown>, to: Record<string, unknown>, node: SchemaNode): void {
  for (const [name, value] of Object.entries(from)) {
    if (isPrototypeKey(name, value)) continue;
    const child = childOf(node, name);
    // Below a name df-worker does not know, an object is kept whole: it is reported, not read.
    if (node !== undefined && isPlainObject(value)) {
      if (!isPlainObject(to[name])) to[name] = {};
      merge(value, to[name] as Record<string, unknown>, child);
    } else {
      to[name] = isSetting(child) ? coerce(child.format, value) : value;
    }
  }
}

/** Sets a dotted name, making the groups on its way; false when one of them holds a value that is not an object. */
function place(values: Record<string, unknown>, setting: string, value: unknown): boolean {
  const names = setting.split('.');
  if (names.some((name) => isPrototypeKey(name))) return true;
  const last = names.pop()!;
  let parent = values;
  for (const name of names) {
    const next = parent[name];
    if (next === undefined || next === null) parent[name] = {};
    else if (!isPlainObject(next)) return false;
    parent = parent[name] as Record<string, unknown>;
  }
  parent[last] = value;
  return true;
}
