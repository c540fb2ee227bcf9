// The request bodies the emulator accepts, as schemas: task definitions, reports, variable updates, enqueued
// executions (admin) and fault rules (admin). Each refusal names the first bad member, as the service does.
import * as v from 'valibot';
import type { JobContext, JsonObject, ReportStatus, TaskDefinition } from '../api/types.ts';
import { isPlainObject, plainObject } from '../schema/plain-object.ts';
import { firstIssue, issuePath, record } from '../schema/record.ts';
import { InvalidFaultRuleError, InvalidTaskDefinitionError } from './errors.ts';
import { EMULATOR_OPERATIONS } from './routes.ts';
import type { FaultRule, NewVariable } from './types.ts';
import type { VariableChanges } from './types.ts';

const json = (value: unknown): string => JSON.stringify(value) ?? 'undefined';
const nonNegativeInteger = (message: string) =>
  v.pipe(v.number(message), v.integer(message), v.minValue(0, message));

function keyDescriptions(member: string) {
  const message = `${member} must be an array of {key: string, description: string}.`;
  const entry = record(
    { key: v.string(message), description: v.nullish(v.string(message), '') },
    () => message,
  );
  return v.optional(v.array(entry, message), []);
}

const LACKS_KEY = 'The task definition lacks `key`; send a non-empty string key.';
// Members other than `key` default like an empty task.
const taskDefinition = record(
  {
    key: v.pipe(v.string(LACKS_KEY), v.nonEmpty(LACKS_KEY)),
    description: v.optional(v.string('description must be a string.'), ''),
    retryCount: v.optional(nonNegativeInteger('retryCount must be a non-negative integer.'), 0),
    inputKeys: keyDescriptions('inputKeys'),
    outputKeys: keyDescriptions('outputKeys'),
  },
  () => 'A task definition must be a JSON object.',
);

/** Validates a create/update body; throws InvalidTaskDefinitionError naming the task and the bad member. */
export function parseTaskDefinition(value: unknown): TaskDefinition {
  const result = v.safeParse(taskDefinition, value, { abortEarly: true });
  if (result.success) return result.output;
  const issue = result.issues[0];
  const member = issuePath(issue);
  // Past the key, the key is sound and names the task.
  const task = member === '' || member === 'key' ? '' : `Task '${(value as { key: string }).key}': `;
  throw new InvalidTaskDefinitionError(task + issue.message);
}

const variableChanges = record(
  {
    key: v.pipe(v.string('key must be a non-empty string.'), v.nonEmpty('key must be a non-empty string.')),
    name: v.string('name must be a string.'),
    value: v.string('value must be a string.'),
    secret: v.boolean('secret must be a boolean.'),
    status: v.optional(
      v.literal('ACTIVE', (issue) => `status must be ACTIVE, got ${json(issue.input)}.`),
      'ACTIVE',
    ),
  },
  () => 'the update must be a JSON object {key, name, status, value, secret}.',
);

/** A variable update's members (part 4.7), or what is wrong with them. */
export function parseVariableChanges(body: unknown): VariableChanges | string {
  const result = v.safeParse(variableChanges, body, { abortEarly: true });
  return result.success ? result.output : result.issues[0].message;
}

const report = record(
  {
    status: v.picklist(
      ['COMPLETED', 'FAILED'],
      (issue) => `status must be COMPLETED or FAILED, got ${json(issue.input)}.`,
    ),
    output: v.optional(plainObject<JsonObject>('output must be a JSON object when present.')),
  },
  () => 'The report must be a JSON object {id, status, output}.',
);

/** A report's status and output (part 4.3), or the refusal; `id` names the execution in it. */
export function parseReport(
  id: string,
  body: unknown,
): { status: ReportStatus; output?: JsonObject } | string {
  const result = v.safeParse(report, body, { abortEarly: true });
  if (result.success) return result.output;
  const issue = result.issues[0];
  return issuePath(issue) === '' ? issue.message : `Execution '${id}': ${issue.message}`;
}

const ENQUEUE_SHAPES = 'Send {taskId | taskKey, input?, context?} or {taskId | taskKey, inputs: [...]}.';
const context = v.optional(plainObject<JobContext>('context must be a JSON object.'));
const oneExecution = record(
  { context, input: v.optional(plainObject<JsonObject>('input must be a JSON object.')) },
  () => ENQUEUE_SHAPES,
);
const manyExecutions = record(
  {
    context,
    inputs: v.array(
      plainObject<JsonObject>('inputs must be an array of objects.'),
      'inputs must be an array of objects.',
    ),
  },
  () => ENQUEUE_SHAPES,
);
const enqueue = v.lazy((body) => {
  if (!isPlainObject(body)) return v.never(ENQUEUE_SHAPES);
  if (typeof (body.taskId ?? body.taskKey) !== 'string') {
    return v.never('Name the task with taskId or taskKey (a string).');
  }
  return body.inputs === undefined ? oneExecution : manyExecutions;
});

/** An admin enqueue: one execution, or several when `inputs` is given. */
export type EnqueueRequest = { task: string; context: JobContext | undefined } & (
  { input: JsonObject | undefined } | { inputs: JsonObject[] }
);

/** Reads `{taskId | taskKey, input?, context?}` or `{taskId | taskKey, inputs: [...]}`, or says what is wrong. */
export function parseEnqueue(body: unknown): EnqueueRequest | string {
  const result = v.safeParse(enqueue, body, { abortEarly: true });
  if (!result.success) return result.issues[0].message;
  const { taskId, taskKey } = body as { taskId?: unknown; taskKey?: unknown };
  return { task: (taskId ?? taskKey) as string, ...result.output } as EnqueueRequest;
}

const integerIn = (min: number, max: number, message: string) =>
  v.pipe(v.number(message), v.integer(message), v.minValue(min, message), v.maxValue(max, message));
const numberIn = (min: number, max: number, message: string) =>
  v.pipe(v.number(message), v.minValue(min, message), v.maxValue(max, message));

const KIND_MESSAGE =
  "kind must be one of 'status', 'rateLimit', 'latency', 'dropAfterApply', 'drop', 'responseTimeout'";
const ruleTarget = {
  operation: v.optional(
    v.picklist(
      ['*', ...EMULATOR_OPERATIONS],
      `operation must be '*' or one of ${EMULATOR_OPERATIONS.join(', ')}`,
    ),
  ),
  taskId: v.optional(v.string('taskId must be a string')),
  probability: v.optional(numberIn(0, 1, 'probability must be a number from 0 to 1')),
  count: v.optional(nonNegativeInteger('count must be a non-negative integer')),
};
const NOT_A_RULE = () => 'it is not an object';
const rule = <const E extends v.ObjectEntries>(entries: E) =>
  record({ ...ruleTarget, ...entries }, NOT_A_RULE);
const ruleByKind: Record<string, v.GenericSchema> = {
  status: rule({
    status: integerIn(100, 599, 'status must be an HTTP status'),
    body: v.optional(v.string('body must be a string')),
    contentType: v.optional(v.string('contentType must be a string')),
    headers: v.optional(
      v.pipe(
        v.custom<Record<string, unknown>>(isPlainObject, 'headers must map names to strings'),
        v.check(
          (headers) => Object.values(headers).every((value) => typeof value === 'string'),
          'headers must map names to strings',
        ),
      ),
    ),
  }),
  rateLimit: rule({
    retryAfterSeconds: v.optional(nonNegativeInteger('retryAfterSeconds must be a non-negative integer')),
  }),
  latency: rule({
    ms: numberIn(0, Number.MAX_SAFE_INTEGER, 'ms must be a non-negative number'),
  }),
  dropAfterApply: rule({}),
  drop: rule({}),
  responseTimeout: rule({
    // It times claims, which only polls make.
    operation: v.optional(
      v.picklist(['*', 'tasks.poll'], "a responseTimeout rule times claims: operation must be 'tasks.poll'"),
    ),
    ms: numberIn(1, Number.MAX_SAFE_INTEGER, 'ms must be a positive number'),
    requeue: v.optional(
      v.picklist(['new-execution', 'same-id'], "requeue must be 'new-execution' or 'same-id'"),
    ),
  }),
};
const unknownKind = rule({ kind: v.custom(() => false, KIND_MESSAGE) });
// A rule that is not an object is refused by unknownKind's record check.
const faultRule = v.lazy((rule) => {
  const kind = isPlainObject(rule) ? rule.kind : undefined;
  return typeof kind === 'string' && Object.hasOwn(ruleByKind, kind) ? ruleByKind[kind]! : unknownKind;
});

/** Where the fault rules' format is written down, with an example of each kind; every refusal points there. */
export const FAULT_RULES_DOC = 'handlers/README.md#fault-rules (in the df-worker package)';

/** Checks rules that may come from JSON (the admin surface); returns copies safe to keep. */
export function validateFaultRules(value: unknown): FaultRule[] {
  const refuse = (problem: string) =>
    new InvalidFaultRuleError(`${problem} The format, with an example of each kind: ${FAULT_RULES_DOC}.`);
  if (!Array.isArray(value)) {
    throw refuse('Fault rules must be an array of rule objects: PUT /__admin/faults {"rules": [...]}.');
  }
  return value.map((rule: unknown, index) => {
    const issue = firstIssue(faultRule, rule);
    if (issue) throw refuse(`Fault rule #${index} is invalid: ${issue.message}.`);
    return structuredClone(rule) as FaultRule;
  });
}

const NEW_VARIABLE = 'A variable is created from {id?, key, value, name?, secret?}.';
const newVariable = record(
  {
    id: v.optional(
      v.pipe(v.string('id must be a non-empty string.'), v.nonEmpty('id must be a non-empty string.')),
    ),
    key: v.pipe(v.string('key must be a non-empty string.'), v.nonEmpty('key must be a non-empty string.')),
    value: v.string('value must be a string.'),
    name: v.optional(v.string('name must be a string.')),
    secret: v.optional(v.boolean('secret must be true or false.')),
  },
  () => NEW_VARIABLE,
);

/** An admin variable (`POST /__admin/variables`), or what is wrong with it. */
export function parseNewVariable(body: unknown): NewVariable | string {
  const result = v.safeParse(newVariable, body, { abortEarly: true });
  return result.success ? result.output : result.issues[0].message;
}
