// Boundary checks for the service's answers: `unknown` JSON in, typed records out, or a ResponseValidationError
// naming the field. Only what the rest of the daemon relies on is enforced; a task's other fields are kept.
import * as v from 'valibot';
import { isPlainObject, plainObject } from '../schema/plain-object.ts';
import { issuePath, record } from '../schema/record.ts';
import { ResponseValidationError } from './errors.ts';
import type {
  Job,
  JsonObject,
  KeyDescription,
  ListEnvelope,
  Operation,
  JobExecution,
  JobRunRecord,
  ServiceFile,
  Task,
  TaskExecution,
  TaskExecutionStatus,
  Variable,
} from './types.ts';
import { TASK_FIELDS } from './types.ts';

// Messages are the problem without the field: one starting with "lacks" gets the field appended, any other
// but a record's own (NOT_A_RECORD) gets it prepended (see `problemOf`).
const requiredString = v.string('lacks string field');
/** An identifier: a string that is not empty (an empty id would address the collection, not a record). */
const id = v.pipe(requiredString, v.nonEmpty('is an empty string'));
const optionalString = v.nullish(v.string('is not a string'));
const number = v.pipe(v.number('lacks number field'), v.finite('lacks number field'));
const object = plainObject<JsonObject>((issue) =>
  issue.input === undefined || issue.input === null ? 'lacks object field' : 'is not an object',
);

/** The discriminator is documented on every record; tolerate its absence, but not a different record type. */
function tag<const T extends string>(expected: T) {
  return v.optional(
    v.literal(expected, (issue) => `is ${JSON.stringify(issue.input)}, expected '${expected}'`),
  );
}

/** Problems of a record that is not an object at all, which its path alone names: `is not a task object`. */
const NOT_A_RECORD = new Set<string>();

function answerRecord<const E extends v.ObjectEntries>(entries: E, what: string) {
  const problem = `is not ${what} object`;
  NOT_A_RECORD.add(problem);
  return record(entries, () => problem);
}

const keyDescription = answerRecord(
  // An empty description may plausibly come back as null or be left out; nothing depends on it.
  { key: requiredString, description: optionalString },
  'a key description',
);

const taskSchema = answerRecord(
  {
    object: tag('task'),
    id,
    createdAt: optionalString,
    key: requiredString,
    description: optionalString,
    retryCount: v.optional(number),
    inputKeys: v.array(keyDescription, 'lacks array field'),
    outputKeys: v.array(keyDescription, 'lacks array field'),
    updatedAt: optionalString,
  },
  'a task',
);

const taskExecutionSchema = answerRecord(
  {
    object: tag('task_execution'),
    id,
    taskId: id,
    createdAt: optionalString,
    status: requiredString,
    input: object,
    updatedAt: optionalString,
    output: v.nullish(object),
  },
  'a task execution',
);

const listSchema = answerRecord(
  {
    object: tag('list'),
    totalElements: number,
    data: v.array(v.unknown(), 'lacks array field'),
  },
  'a list',
);

const variableSchema = answerRecord(
  {
    object: tag('variable'),
    secret: v.optional(v.boolean('is not a boolean')),
    id,
    createdAt: optionalString,
    name: optionalString,
    key: requiredString,
    value: requiredString,
    status: optionalString,
    updatedAt: optionalString,
  },
  'a variable',
);

const fileSchema = answerRecord({ id }, 'a file');
const jobExecutionSchema = answerRecord({ id }, 'a job execution');
// What successor pacing reads of a run in the job-executions list (see JobRunRecord): a run without its job
// or its status cannot tell which task may soon get work, and the list is then not used at all.
const jobRunSchema = answerRecord(
  {
    id,
    jobId: requiredString,
    status: requiredString,
    createdAt: requiredString,
    startedAt: optionalString,
    endedAt: optionalString,
  },
  'a job execution in the list',
);
// A job's fields are not shown (part 4.6): only that it is an object; the pipeline model reads what it can.
const jobSchema = answerRecord({}, 'a job');

/** Parses `value` at `path` inside the answer, or throws naming the first field that is wrong. */
function check<S extends v.GenericSchema>(
  schema: S,
  operation: Operation,
  value: unknown,
  path = '',
): v.InferOutput<S> {
  const result = v.safeParse(schema, value, { abortEarly: true });
  if (result.success) return result.output;
  const issue = result.issues[0];
  const inner = issuePath(issue);
  const field =
    path === '' ? inner : inner === '' ? path : inner.startsWith('[') ? path + inner : `${path}.${inner}`;
  throw new ResponseValidationError(operation, field === '' ? '(body)' : field, problemOf(issue, field));
}

function problemOf(issue: v.BaseIssue<unknown>, field: string): string {
  if (issue.message.startsWith('lacks ')) return `${issue.message} '${field}'`;
  if (NOT_A_RECORD.has(issue.message)) return issue.message;
  return `field '${field}' ${issue.message}`;
}

function keyDescriptions(items: v.InferOutput<typeof keyDescription>[]): KeyDescription[] {
  return items.map((item) => ({ key: item.key, description: item.description ?? '' }));
}

/** Validates a Task (part 2.1). `path` locates it inside a larger answer, e.g. `data[4]`. */
export function parseTask(operation: Operation, value: unknown, path = ''): Task {
  const checked = check(taskSchema, operation, value, path);
  const task: Task = {
    object: 'task',
    id: checked.id,
    createdAt: checked.createdAt ?? '',
    key: checked.key,
    description: checked.description ?? '',
    retryCount: checked.retryCount ?? 0,
    inputKeys: keyDescriptions(checked.inputKeys),
    outputKeys: keyDescriptions(checked.outputKeys),
  };
  if (typeof checked.updatedAt === 'string') task.updatedAt = checked.updatedAt;
  const extraFields = extraFieldsOf(value as JsonObject);
  if (extraFields !== undefined) task.extraFields = extraFields;
  return task;
}

/** The fields of a task record beyond TASK_FIELDS, as sent; undefined when there are none. */
export function extraFieldsOf(record: JsonObject): JsonObject | undefined {
  const known = new Set(TASK_FIELDS);
  const extra = Object.entries(record).filter(([field]) => !known.has(field));
  return extra.length === 0 ? undefined : Object.fromEntries(extra);
}

/**
 * Validates a TaskExecution (part 2.2): `id`, `taskId`, `status` strings and `input` an object are required.
 * When the answer is unusable but carries a non-empty string `id`, the error names it (`executionId`).
 */
export function parseTaskExecution(operation: Operation, value: unknown): TaskExecution {
  try {
    return readTaskExecution(operation, value);
  } catch (error) {
    const executionId = isPlainObject(value) ? value.id : undefined;
    if (error instanceof ResponseValidationError && typeof executionId === 'string' && executionId !== '') {
      throw new ResponseValidationError(error.operation, error.field, error.problem, executionId);
    }
    throw error;
  }
}

function readTaskExecution(operation: Operation, value: unknown): TaskExecution {
  const checked = check(taskExecutionSchema, operation, value);
  const execution: TaskExecution = {
    object: 'task_execution',
    id: checked.id,
    taskId: checked.taskId,
    createdAt: checked.createdAt ?? '',
    // Kept as the service sent it: a status added by a later API version must not make a claimed execution unreadable.
    status: checked.status as TaskExecutionStatus,
    input: checked.input,
  };
  if (typeof checked.updatedAt === 'string') execution.updatedAt = checked.updatedAt;
  if (checked.output !== undefined && checked.output !== null) execution.output = checked.output;
  return execution;
}

/** Validates the list envelope (part 2.13) and each element with `parseItem`. */
export function parseListEnvelope<T>(
  operation: Operation,
  value: unknown,
  parseItem: (operation: Operation, item: unknown, path: string) => T,
): ListEnvelope<T> {
  const checked = check(listSchema, operation, value);
  const data = checked.data.map((item, index) => parseItem(operation, item, `data[${index}]`));
  return { object: 'list', data, totalElements: checked.totalElements };
}

/** Validates a file record; its fields are undocumented (part 2.15), so only `id` is required. */
export function parseServiceFile(operation: Operation, value: unknown): ServiceFile {
  check(fileSchema, operation, value);
  return value as ServiceFile;
}

/** Validates a job execution record; its fields are undocumented (part 2.15), so only `id` is required. */
/** Validates a job record: any object; its members are kept as they came. */
export function parseJob(operation: Operation, value: unknown): Job {
  check(jobSchema, operation, value);
  return value as Job;
}

export function parseJobExecution(operation: Operation, value: unknown): JobExecution {
  check(jobExecutionSchema, operation, value);
  return value as JobExecution;
}

/** Validates a run in the job-executions list: `id`, `jobId`, `status` and `createdAt` strings are required. */
export function parseJobRun(operation: Operation, value: unknown, path = ''): JobRunRecord {
  check(jobRunSchema, operation, value, path);
  return value as JobRunRecord;
}

/** Validates a Variable (part 2.3): `id`, `key` and `value` strings are required. */
export function parseVariable(operation: Operation, value: unknown): Variable {
  const checked = check(variableSchema, operation, value);
  const variable: Variable = {
    object: 'variable',
    id: checked.id,
    createdAt: checked.createdAt ?? '',
    name: checked.name ?? '',
    key: checked.key,
    value: checked.value,
    secret: checked.secret === true,
    status: checked.status ?? 'ACTIVE',
  };
  if (typeof checked.updatedAt === 'string') variable.updatedAt = checked.updatedAt;
  return variable;
}
