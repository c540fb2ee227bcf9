// The custom-task surface of the service (tasks, executions, v2 files, variables, job executions), answered
// from the store.
// Auth, limits and faults are decided before this runs; here only the operation itself happens.
import type { Variable } from '../api/types.ts';
import { InvalidTaskDefinitionError } from './errors.ts';
import { isPlainObject } from '../schema/plain-object.ts';
import { parseReport, parseVariableChanges } from './bodies.ts';
import type { FileStore } from './file-store.ts';
import { matchesQuery, pageOf, parsePageQuery, parseQuery } from './query.ts';
import { toWireExecution } from './store.ts';
import type { Store } from './store.ts';
import type { EmulatorOperation } from './types.ts';
import type { EmulatedVariable, VariableStore } from './variable-store.ts';
import { checkJsonBody } from '../security/request-guard.ts';
import { emptyAnswer, errorAnswer, jsonAnswer, messageAnswer, parseJson } from './wire.ts';
import type { Answer } from './wire.ts';

export interface ServiceRequest {
  operation: EmulatorOperation;
  id?: string;
  query: URLSearchParams;
  contentType: string | undefined;
  /** The `If-Match` header of a variable update, as sent. */
  ifMatch?: string | undefined;
  body: Buffer;
  nowMs: number;
}

export async function answerService(store: Store, request: ServiceRequest): Promise<Answer> {
  const { operation, nowMs } = request;
  const id = request.id ?? '';
  switch (operation) {
    case 'tasks.list':
      return listTasks(store, request.query, nowMs);
    case 'tasks.create':
      return withJsonBody(request, (body) => jsonAnswer(201, store.createTask(body)));
    case 'tasks.get': {
      const task = store.getTask(id);
      return task ? jsonAnswer(200, task) : taskNotFound(id, nowMs);
    }
    case 'tasks.update':
      return withJsonBody(request, (body) => {
        const task = store.updateTask(id, body);
        return task ? jsonAnswer(201, task) : taskNotFound(id, nowMs);
      });
    case 'tasks.delete':
      return store.deleteTask(id) ? emptyAnswer(201) : taskNotFound(id, nowMs);
    case 'tasks.poll': {
      if (!store.getTask(id)) return taskNotFound(id, nowMs);
      const execution = store.claimNext(id);
      return execution
        ? jsonAnswer(200, toWireExecution(execution))
        : errorAnswer(404, 'NOT_FOUND', `No execution of task '${id}' is pending; poll again later.`, nowMs);
    }
    case 'executions.get': {
      const execution = store.getExecution(id);
      return execution ? jsonAnswer(200, toWireExecution(execution)) : executionNotFound(id, nowMs);
    }
    case 'executions.report':
      return withJsonBody(request, (body) => report(store, id, body, nowMs));
    case 'files.upload':
      return uploadFile(store.files, request);
    case 'files.get': {
      const file = store.files.get(id);
      return file ? jsonAnswer(200, file) : notFound(`No file has id '${id}'.`, nowMs);
    }
    case 'variables.create':
      return withJsonBody(request, (body) => createVariable(store.variables, body, nowMs));
    case 'variables.list':
      return listVariables(store.variables, request.query, undefined, nowMs);
    case 'variables.find':
      return withJsonBody(request, (body) => {
        const query = parseQuery(body);
        if (typeof query === 'string') return badRequest(`Find: ${query}`, nowMs);
        return listVariables(
          store.variables,
          request.query,
          (variable) => matchesQuery(query, { ...variable }),
          nowMs,
        );
      });
    case 'variables.get': {
      const stored = store.variables.get(id);
      return stored ? versionedAnswer(200, stored) : variableNotFound(id, nowMs);
    }
    case 'variables.update':
      return withJsonBody(request, (body) => updateVariable(store.variables, id, body, request));
    case 'jobExecutions.get': {
      const record = store.jobs.getExecution(id);
      return record ? jsonAnswer(200, record) : notFound(`No job execution has id '${id}'.`, nowMs);
    }
    case 'jobs.list': {
      const page = parsePageQuery(request.query);
      if (typeof page === 'string') return badRequest(page, nowMs);
      const jobs = store.jobs.list();
      return jsonAnswer(200, { object: 'list', data: pageOf(jobs, page), totalElements: jobs.length });
    }
    case 'jobExecutions.list': {
      // Paged and sorted like every list (sort=createdAt&sortOrder=DESC: newest first).
      const page = parsePageQuery(request.query);
      if (typeof page === 'string') return badRequest(page, nowMs);
      const runs = store.jobs.executions();
      return jsonAnswer(200, { object: 'list', data: pageOf(runs, page), totalElements: runs.length });
    }
    case 'jobExecutions.create':
      return withJsonBody(request, (body) =>
        isPlainObject(body)
          ? jsonAnswer(201, store.jobs.createExecution(body))
          : badRequest('A job execution must be created from a JSON object.', nowMs),
      );
  }
}

/** Part 2.3: a secret variable's value is not answered back on create (an empty string stands for it). */
function createVariable(variables: VariableStore, body: unknown, nowMs: number): Answer {
  const changes = parseVariableChanges(body);
  if (typeof changes === 'string') return badRequest(`New variable: ${changes}`, nowMs);
  const { variable } = variables.create(changes);
  return jsonAnswer(201, variable.secret ? { ...variable, value: '' } : variable);
}

/** A page of the variables (those `matches` keeps, for find), in creation order unless `sort` says otherwise. */
function listVariables(
  variables: VariableStore,
  query: URLSearchParams,
  matches: ((variable: Variable) => boolean) | undefined,
  nowMs: number,
): Answer {
  const page = parsePageQuery(query);
  if (typeof page === 'string') return badRequest(page, nowMs);
  const found = matches === undefined ? variables.list() : variables.list().filter(matches);
  return jsonAnswer(200, { object: 'list', data: pageOf(found, page), totalElements: found.length });
}

/** Part 8: the ETag is the version as a quoted string; a mismatched If-Match changes nothing (412). */
function updateVariable(
  variables: VariableStore,
  id: string,
  body: unknown,
  request: ServiceRequest,
): Answer {
  const { nowMs, ifMatch } = request;
  const stored = variables.get(id);
  if (!stored) return variableNotFound(id, nowMs);
  const changes = parseVariableChanges(body);
  if (typeof changes === 'string') return badRequest(`Variable '${id}': ${changes}`, nowMs);
  if (ifMatch !== undefined && ifMatch !== etagOf(stored)) {
    const message =
      `Variable '${id}' is at version ${etagOf(stored)}, not ${ifMatch}; ` + 'nothing was changed.';
    return errorAnswer(412, 'PRECONDITION_FAILED', message, nowMs);
  }
  return versionedAnswer(201, variables.update(id, changes)!);
}

function etagOf(stored: EmulatedVariable): string {
  return `"${stored.version}"`;
}

function versionedAnswer(status: number, stored: EmulatedVariable): Answer {
  return jsonAnswer(status, stored.variable, { etag: etagOf(stored) });
}

function listTasks(store: Store, query: URLSearchParams, nowMs: number): Answer {
  const page = parsePageQuery(query);
  if (typeof page === 'string') return badRequest(page, nowMs);
  return jsonAnswer(200, store.listTasks(page.page, page.size));
}

function report(store: Store, id: string, body: unknown, nowMs: number): Answer {
  if (!store.getExecution(id)) return executionNotFound(id, nowMs);
  const parsed = parseReport(id, body);
  if (typeof parsed === 'string') return badRequest(parsed, nowMs);
  // 409: the report is well formed and the execution exists, but its claim lapsed (see handlers/README.md,
  // "Response timeouts").
  const refusal = store.reportRefusal(id);
  if (refusal !== undefined) return errorAnswer(409, 'CONFLICT', refusal, nowMs);
  const { status, output } = parsed;
  return jsonAnswer(200, toWireExecution(store.report(id, status, output)!));
}

async function uploadFile(files: FileStore, request: ServiceRequest): Promise<Answer> {
  const contentType = request.contentType ?? '';
  if (!/^multipart\/form-data\s*;.*boundary=/i.test(contentType)) {
    return messageAnswer(
      400,
      'Uploads must be multipart/form-data with a boundary; send the file as a form part.',
    );
  }
  let form: FormData;
  try {
    form = await new Request('http://emulator.invalid/upload', {
      method: 'POST',
      headers: { 'content-type': contentType },
      body: new Uint8Array(request.body),
    }).formData();
  } catch {
    return messageAnswer(400, 'The multipart body could not be parsed; check its boundary and part headers.');
  }
  const file = [...form.values()].find((value): value is File => typeof value !== 'string');
  if (!file) {
    return messageAnswer(400, 'The multipart body has no file part; attach the file with a filename.');
  }
  return jsonAnswer(201, files.add(file.name, file.size, file.type || 'application/octet-stream'));
}

/** Parses the JSON body, answering the service's `{message}`-only 400 when it is malformed. */
function withJsonBody(request: ServiceRequest, handle: (body: unknown) => Answer): Answer {
  // A form a page posts (urlencoded, multipart, text/plain) is no JSON body, whatever it holds.
  const notJson = checkJsonBody(request.contentType, request.body.length);
  if (notJson) return jsonAnswer(notJson.status, notJson.toJSON());
  const parsed = parseJson(request.body);
  if (!parsed.ok) return messageAnswer(400, 'The request body is not valid JSON; send a JSON object.');
  try {
    return handle(parsed.value);
  } catch (error) {
    if (error instanceof InvalidTaskDefinitionError) return badRequest(error.message, request.nowMs);
    throw error;
  }
}

function badRequest(message: string, nowMs: number): Answer {
  return errorAnswer(400, 'BAD_REQUEST', message, nowMs);
}

function taskNotFound(id: string, nowMs: number): Answer {
  return errorAnswer(404, 'NOT_FOUND', `No task has id '${id}'; list tasks to find its id.`, nowMs);
}

function variableNotFound(id: string, nowMs: number): Answer {
  return notFound(`No variable has id '${id}'.`, nowMs);
}

function notFound(message: string, nowMs: number): Answer {
  return errorAnswer(404, 'NOT_FOUND', message, nowMs);
}

function executionNotFound(id: string, nowMs: number): Answer {
  return errorAnswer(404, 'NOT_FOUND', `No task execution has id '${id}'.`, nowMs);
}
