// The admin surface over HTTP (`/__admin/...`): the in-process admin API for tests and tools in other
// processes. No API key, never rate-limited, never faulted, never in the request log.
import type { JobContext, JsonObject, Task } from '../api/types.ts';
import { InvalidFaultRuleError, InvalidTaskDefinitionError, UnknownTaskError } from './errors.ts';
import { isObject } from './store.ts';
import type { EmulatedExecution, FaultRule, RequestRecord } from './types.ts';
import { emptyAnswer, errorAnswer, jsonAnswer, messageAnswer, parseJson } from './wire.ts';
import type { Answer } from './wire.ts';

/** The emulator methods the admin surface exposes. */
export interface AdminOperations {
  createTask(definition: { key: string }): Task;
  enqueueExecution(taskIdOrKey: string, input?: JsonObject, context?: JobContext): EmulatedExecution;
  executions(): EmulatedExecution[];
  requests(): RequestRecord[];
  setFaults(faults: FaultRule[]): void;
  clearFaults(): void;
  reset(): void;
}

export function answerAdmin(
  admin: AdminOperations,
  method: string,
  path: string,
  bytes: Buffer,
  nowMs: number,
): Answer {
  const parsed = parseJson(bytes);
  if (!parsed.ok) return messageAnswer(400, 'The admin request body is not valid JSON; send a JSON object.');
  const body = parsed.value;
  try {
    switch (`${method} ${path.replace(/\/+$/, '')}`) {
      case 'POST /__admin/tasks':
        return jsonAnswer(201, admin.createTask(body as { key: string }));
      case 'POST /__admin/executions':
        return enqueue(admin, body, nowMs);
      case 'GET /__admin/executions':
        return jsonAnswer(200, { data: admin.executions() });
      case 'GET /__admin/requests':
        return jsonAnswer(200, { data: admin.requests() });
      case 'PUT /__admin/faults':
        admin.setFaults((isObject(body) ? body.rules : undefined) as FaultRule[]);
        return emptyAnswer(204);
      case 'DELETE /__admin/faults':
        admin.clearFaults();
        return emptyAnswer(204);
      case 'POST /__admin/reset':
        admin.reset();
        return emptyAnswer(204);
      default:
        return errorAnswer(
          404,
          'NOT_FOUND',
          `No admin route ${method} ${path}; see the emulator's admin surface.`,
          nowMs,
        );
    }
  } catch (error) {
    if (error instanceof InvalidTaskDefinitionError || error instanceof InvalidFaultRuleError) {
      return errorAnswer(400, 'BAD_REQUEST', error.message, nowMs);
    }
    if (error instanceof UnknownTaskError) return errorAnswer(404, 'NOT_FOUND', error.message, nowMs);
    throw error;
  }
}

/** `{taskId | taskKey, input?, context?}` enqueues one execution; `{..., inputs: [...]}` enqueues several. */
function enqueue(admin: AdminOperations, body: unknown, nowMs: number): Answer {
  const bad = (message: string) => errorAnswer(400, 'BAD_REQUEST', message, nowMs);
  if (!isObject(body)) {
    return bad('Send {taskId | taskKey, input?, context?} or {taskId | taskKey, inputs: [...]}.');
  }
  const task = body.taskId ?? body.taskKey;
  if (typeof task !== 'string') return bad('Name the task with taskId or taskKey (a string).');
  if (body.context !== undefined && !isObject(body.context)) return bad('context must be a JSON object.');
  const context: JobContext | undefined = body.context;
  if (body.inputs !== undefined) {
    if (!Array.isArray(body.inputs) || !body.inputs.every(isObject)) {
      return bad('inputs must be an array of objects.');
    }
    const data = body.inputs.map((input) => admin.enqueueExecution(task, input, context));
    return jsonAnswer(201, { object: 'list', data, totalElements: data.length });
  }
  if (body.input !== undefined && !isObject(body.input)) return bad('input must be a JSON object.');
  return jsonAnswer(201, admin.enqueueExecution(task, body.input, context));
}
