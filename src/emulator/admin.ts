// The admin surface over HTTP (`/__admin/...`): the in-process admin API for tests and tools in other
// processes. No API key (an admin token when the emulator has one), never rate-limited, never faulted, never in
// the request log. `GET /__admin` lists the routes below.
import type { JobContext, JsonObject, Task, Variable } from '../api/types.ts';
import {
  InvalidFaultRuleError,
  InvalidTaskDefinitionError,
  UnknownTaskError,
  VariableExistsError,
} from './errors.ts';
import { answerRecords, RECORD_ROUTES, type RecordOperations } from './admin-records.ts';
import { isPlainObject } from '../schema/plain-object.ts';
import { parseEnqueue, parseNewVariable } from './bodies.ts';
import type { EmulatedExecution, FaultRule, NewVariable, RequestRecord } from './types.ts';
import type { IncomingHttpHeaders } from 'node:http';
import { checkJsonBody } from '../security/request-guard.ts';
import { emptyAnswer, errorAnswer, jsonAnswer, messageAnswer, parseJson, refusalAnswer } from './wire.ts';
import type { Answer, RequestBody } from './wire.ts';

/** The emulator methods the admin surface exposes. */
export interface AdminOperations extends RecordOperations {
  createTask(definition: { key: string }): Task;
  tasks(): Task[];
  enqueueExecution(taskIdOrKey: string, input?: JsonObject, context?: JobContext): EmulatedExecution;
  executions(): EmulatedExecution[];
  createVariable(variable: NewVariable): Variable & { etag: string };
  execution(id: string): EmulatedExecution | undefined;
  requests(): RequestRecord[];
  setFaults(faults: FaultRule[]): void;
  clearFaults(): void;
  reset(): void;
  /** The emulator's clock now (ms since the epoch), as its answers' Date header names it. */
  now(): number;
  /** Whether `authorization` (a request's header) carries the admin token, or none is needed. */
  adminAuthorized(authorization: string | undefined): boolean;
  readonly adminTokenRequired: boolean;
}

/** Every admin route, as `GET /__admin` lists them: the one catalogue the router and the docs follow. */
export const ADMIN_ROUTES: readonly { method: string; path: string; does: string }[] = [
  { method: 'GET', path: '/__admin', does: 'this list of routes (needs no admin token)' },
  { method: 'GET', path: '/__admin/tasks', does: 'the tasks, as {data: [...]}' },
  {
    method: 'POST',
    path: '/__admin/tasks',
    does: 'creates a task from {key, description?, retryCount?, inputKeys?, outputKeys?}',
  },
  {
    method: 'POST',
    path: '/__admin/executions',
    does: 'enqueues an execution: {taskKey | taskId, input?, context?}, or several with {..., inputs: [...]}',
  },
  { method: 'GET', path: '/__admin/executions', does: 'every execution with its claim and reports' },
  { method: 'GET', path: '/__admin/executions/{id}', does: 'one execution with its claim and reports' },
  {
    method: 'GET',
    path: '/__admin/requests',
    does: 'the log of service requests (status, operation, latency)',
  },
  {
    method: 'PUT',
    path: '/__admin/faults',
    does: 'replaces the fault table: {rules: [...]} (format: handlers/README.md#fault-rules)',
  },
  { method: 'DELETE', path: '/__admin/faults', does: 'clears the fault table' },
  {
    method: 'POST',
    path: '/__admin/reset',
    does: 'forgets tasks, executions, requests, faults and used budget',
  },
  ...RECORD_ROUTES,
];

/** The admin root's answer: the routes, and how to authenticate when a token is required. */
export function adminIndex(tokenRequired: boolean): Answer {
  return jsonAnswer(200, {
    routes: ADMIN_ROUTES.map((r) => `${r.method} ${r.path}: ${r.does}`),
    authorization: tokenRequired
      ? 'every route but GET /__admin needs Authorization: Bearer <admin token> (printed by df-worker dev, and in its session file)'
      : 'none: this emulator has no admin token',
  });
}

/**
 * The answer to any request under `/__admin`: its body within `maxBytes` and JSON, the index open to anyone,
 * every other route only with the admin token when the emulator has one.
 */
export function answerAdminRequest(
  admin: AdminOperations,
  method: string,
  path: string,
  headers: IncomingHttpHeaders,
  body: RequestBody,
  maxBytes: number,
): Answer {
  if (body.tooLarge) return messageAnswer(413, `The admin request body exceeds ${maxBytes} bytes.`);
  const notJson = checkJsonBody(headers['content-type'], body.bytes.length);
  if (notJson) return refusalAnswer(notJson);
  if (method === 'GET' && /^\/__admin\/*$/.test(path)) return adminIndex(admin.adminTokenRequired);
  if (!admin.adminAuthorized(headers.authorization)) {
    return errorAnswer(
      401,
      'UNAUTHENTICATED',
      'This emulator requires its admin token: send Authorization: Bearer <admin token> ' +
        '(df-worker dev prints it and writes it to its session file).',
      admin.now(),
    );
  }
  return answerAdmin(admin, method, path, body.bytes, admin.now());
}

function answerAdmin(
  admin: AdminOperations,
  method: string,
  path: string,
  bytes: Buffer,
  nowMs: number,
): Answer {
  const parsed = parseJson(bytes);
  if (!parsed.ok) return messageAnswer(400, 'The admin request body is not valid JSON; send a JSON object.');
  const body = parsed.value;
  const route = path.replace(/\/+$/, '');
  const executionId = /^\/__admin\/executions\/([^/]+)$/.exec(route)?.[1];
  try {
    if (method === 'GET' && executionId !== undefined) return oneExecution(admin, executionId, nowMs);
    switch (`${method} ${route}`) {
      case 'GET /__admin/tasks':
        return jsonAnswer(200, { data: admin.tasks() });
      case 'POST /__admin/tasks':
        return jsonAnswer(201, admin.createTask(body as { key: string }));
      case 'POST /__admin/executions':
        return enqueue(admin, body, nowMs);
      case 'GET /__admin/executions':
        return jsonAnswer(200, { data: admin.executions() });
      case 'POST /__admin/variables': {
        const variable = parseNewVariable(body);
        if (typeof variable === 'string') return errorAnswer(400, 'BAD_REQUEST', variable, nowMs);
        return jsonAnswer(201, admin.createVariable(variable));
      }
      case 'GET /__admin/requests':
        return jsonAnswer(200, { data: admin.requests() });
      case 'PUT /__admin/faults':
        admin.setFaults((isPlainObject(body) ? body.rules : undefined) as FaultRule[]);
        return emptyAnswer(204);
      case 'DELETE /__admin/faults':
        admin.clearFaults();
        return emptyAnswer(204);
      case 'POST /__admin/reset':
        admin.reset();
        return emptyAnswer(204);
      default:
        return (
          answerRecords(admin, method, route, body, nowMs) ??
          errorAnswer(
            404,
            'NOT_FOUND',
            `No admin route ${method} ${path}; GET /__admin lists the routes.`,
            nowMs,
          )
        );
    }
  } catch (error) {
    if (error instanceof InvalidTaskDefinitionError || error instanceof InvalidFaultRuleError) {
      return errorAnswer(400, 'BAD_REQUEST', error.message, nowMs);
    }
    if (error instanceof UnknownTaskError) return errorAnswer(404, 'NOT_FOUND', error.message, nowMs);
    if (error instanceof VariableExistsError) return errorAnswer(409, 'ALREADY_EXISTS', error.message, nowMs);
    throw error;
  }
}

function oneExecution(admin: AdminOperations, id: string, nowMs: number): Answer {
  let decoded: string;
  try {
    decoded = decodeURIComponent(id);
  } catch {
    decoded = id;
  }
  const execution = admin.execution(decoded);
  if (!execution) {
    return errorAnswer(
      404,
      'NOT_FOUND',
      `No execution has id '${decoded}'; GET /__admin/executions lists them.`,
      nowMs,
    );
  }
  return jsonAnswer(200, execution);
}

/** `{taskId | taskKey, input?, context?}` enqueues one execution; `{..., inputs: [...]}` enqueues several. */
function enqueue(admin: AdminOperations, body: unknown, nowMs: number): Answer {
  const bad = (message: string) => errorAnswer(400, 'BAD_REQUEST', message, nowMs);
  const request = parseEnqueue(body);
  if (typeof request === 'string') return bad(request);
  const { task, context } = request;
  if ('inputs' in request) {
    const data = request.inputs.map((input) => admin.enqueueExecution(task, input, context));
    return jsonAnswer(201, { object: 'list', data, totalElements: data.length });
  }
  return jsonAnswer(201, admin.enqueueExecution(task, request.input, context));
}
