// The admin routes over the emulator's variables, file records and the keys' use of the limits: what a local
// tool (the web console) needs to create, edit and delete them. The service documents no variable delete and
// no file edit; these exist for local work only and never appear on the service surface.
import * as v from 'valibot';
import type { Variable } from '../api/types.ts';
import { isPlainObject as isObject } from '../schema/plain-object.ts';
import { record } from '../schema/record.ts';
import { parseVariableChanges } from './bodies.ts';
import type { KeyUsageFigures } from './limits.ts';
import type { EmulatedFile } from './file-store.ts';
import type { VariableChanges } from './types.ts';
import { emptyAnswer, errorAnswer, jsonAnswer } from './wire.ts';
import type { Answer } from './wire.ts';

type VersionedVariable = Variable & { etag: string };

/** The emulator methods these routes use. */
export interface RecordOperations {
  variables(): VersionedVariable[];
  variable(id: string): VersionedVariable | undefined;
  updateVariable(id: string, changes: VariableChanges): VersionedVariable | undefined;
  deleteVariable(id: string): boolean;
  files(): EmulatedFile[];
  addFile(file: { name: string; size: number; contentType?: string }): EmulatedFile;
  updateFile(id: string, changes: { name?: string; contentType?: string }): EmulatedFile | undefined;
  deleteFile(id: string): boolean;
  usage(): KeyUsageFigures[];
}

export const RECORD_ROUTES: readonly { method: string; path: string; does: string }[] = [
  { method: 'GET', path: '/__admin/variables', does: 'the variables (values included), as {data: [...]}' },
  {
    method: 'POST',
    path: '/__admin/variables',
    does: 'creates a variable from {id?, key, value, name?, secret?} (id: what ctx.service.variables.get takes)',
  },
  {
    method: 'PUT',
    path: '/__admin/variables/{id}',
    does: 'changes a variable: any of {key, name, value, secret}; a new version',
  },
  { method: 'DELETE', path: '/__admin/variables/{id}', does: 'deletes a variable' },
  { method: 'GET', path: '/__admin/files', does: 'the file records, as {data: [...]}' },
  {
    method: 'POST',
    path: '/__admin/files',
    does: 'adds a file record: {name, content?, contentType?} (content: text, its size is recorded)',
  },
  { method: 'PUT', path: '/__admin/files/{id}', does: 'renames a file record: {name?, contentType?}' },
  { method: 'DELETE', path: '/__admin/files/{id}', does: 'deletes a file record' },
  {
    method: 'GET',
    path: '/__admin/usage',
    does: "each API key's use of the per-second, minute and month limits",
  },
];

const NAME = 'name must be a non-empty string.';
const newFile = record(
  {
    name: v.pipe(v.string(NAME), v.nonEmpty(NAME)),
    content: v.optional(v.string('content must be a string.'), ''),
    contentType: v.optional(v.string('contentType must be a string.')),
  },
  () => 'A file must be a JSON object {name, content?, contentType?}.',
);
const fileChanges = record(
  {
    name: v.optional(v.pipe(v.string(NAME), v.nonEmpty(NAME))),
    contentType: v.optional(v.string('contentType must be a string.')),
  },
  () => 'A file change must be a JSON object {name?, contentType?}.',
);

/** The answer of a route of this file, or undefined when the route is not one of them. */
export function answerRecords(
  ops: RecordOperations,
  method: string,
  route: string,
  body: unknown,
  nowMs: number,
): Answer | undefined {
  const bad = (message: string) => errorAnswer(400, 'BAD_REQUEST', message, nowMs);
  const missing = (what: string, id: string) =>
    errorAnswer(404, 'NOT_FOUND', `No ${what} has id '${id}'; GET /__admin/${what}s lists them.`, nowMs);
  const [, collection, rawId] = /^\/__admin\/(variables|files|usage)(?:\/([^/]+))?$/.exec(route) ?? [];
  if (collection === undefined) return undefined;
  const id = rawId === undefined ? undefined : safeDecode(rawId);
  if (collection === 'usage')
    return method === 'GET' && id === undefined ? jsonAnswer(200, { data: ops.usage() }) : undefined;
  if (collection === 'variables') {
    if (id === undefined) {
      // POST /__admin/variables (create, with an id of the caller's) is admin.ts's own route.
      return method === 'GET' ? jsonAnswer(200, { data: ops.variables() }) : undefined;
    }
    const existing = ops.variable(id);
    if (method === 'DELETE') return ops.deleteVariable(id) ? emptyAnswer(204) : missing('variable', id);
    if (method !== 'PUT') return undefined;
    if (!existing) return missing('variable', id);
    const { key, name, value, secret, status } = existing;
    const changes = parseVariableChanges(
      isObject(body) ? { key, name, value, secret, status, ...body } : body,
    );
    if (typeof changes === 'string') return bad(`Variable '${id}': ${changes}`);
    return jsonAnswer(200, ops.updateVariable(id, changes));
  }
  if (id === undefined) {
    if (method === 'GET') return jsonAnswer(200, { data: ops.files() });
    if (method !== 'POST') return undefined;
    const parsed = v.safeParse(newFile, body, { abortEarly: true });
    if (!parsed.success) return bad(parsed.issues[0].message);
    const { name, content, contentType } = parsed.output;
    const size = Buffer.byteLength(content);
    return jsonAnswer(201, ops.addFile({ name, size, ...(contentType ? { contentType } : {}) }));
  }
  if (method === 'DELETE') return ops.deleteFile(id) ? emptyAnswer(204) : missing('file', id);
  if (method !== 'PUT') return undefined;
  const parsed = v.safeParse(fileChanges, body, { abortEarly: true });
  if (!parsed.success) return bad(parsed.issues[0].message);
  const updated = ops.updateFile(id, stripUndefined(parsed.output));
  return updated ? jsonAnswer(200, updated) : missing('file', id);
}

function stripUndefined<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as T;
}

function safeDecode(id: string): string {
  try {
    return decodeURIComponent(id);
  } catch {
    return id;
  }
}
