// Boundary checks for the service's answers: `unknown` JSON in, typed records out, or a ResponseValidationError
// naming the field. Only what the rest of the daemon relies on is enforced; unknown extra fields pass through.
import { ResponseValidationError } from './errors.ts';
import type {
  JsonObject,
  KeyDescription,
  ListEnvelope,
  Operation,
  JobExecution,
  ServiceFile,
  Task,
  TaskExecution,
  TaskExecutionStatus,
  Variable,
} from './types.ts';

/** A JSON object that is not an array and not null (what the service calls an object / free-form map). */
export function isPlainObject(value: unknown): value is JsonObject {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/** Reads one record's fields, naming each problem with the record's path (e.g. `data[2].key`). */
class FieldReader {
  readonly #operation: Operation;
  readonly #record: JsonObject;
  readonly #path: string;

  constructor(operation: Operation, value: unknown, path: string, what: string) {
    this.#operation = operation;
    this.#path = path;
    if (!isPlainObject(value)) {
      throw new ResponseValidationError(operation, path === '' ? '(body)' : path, `is not ${what} object`);
    }
    this.#record = value;
  }

  fieldPath(name: string): string {
    return this.#path === '' ? name : `${this.#path}.${name}`;
  }

  fail(name: string, problem: string): never {
    const field = this.fieldPath(name);
    throw new ResponseValidationError(this.#operation, field, `field '${field}' ${problem}`);
  }

  raw(name: string): unknown {
    return this.#record[name];
  }

  string(name: string): string {
    const value = this.#record[name];
    if (typeof value !== 'string') this.#lacks(name, 'string');
    return value;
  }

  /** An identifier: a string that is not empty (an empty id would address the collection, not a record). */
  id(name: string): string {
    const value = this.string(name);
    if (value === '') this.fail(name, 'is an empty string');
    return value;
  }

  optionalString(name: string): string | undefined {
    const value = this.#record[name];
    if (value === undefined || value === null) return undefined;
    if (typeof value !== 'string') this.fail(name, 'is not a string');
    return value;
  }

  number(name: string): number {
    const value = this.#record[name];
    if (typeof value !== 'number' || !Number.isFinite(value)) this.#lacks(name, 'number');
    return value;
  }

  object(name: string): JsonObject {
    const value = this.#record[name];
    if (value === undefined || value === null) this.#lacks(name, 'object');
    if (!isPlainObject(value)) this.fail(name, 'is not an object');
    return value;
  }

  array(name: string): unknown[] {
    const value = this.#record[name];
    if (!Array.isArray(value)) this.#lacks(name, 'array');
    return value as unknown[];
  }

  #lacks(name: string, type: string): never {
    const field = this.fieldPath(name);
    throw new ResponseValidationError(this.#operation, field, `lacks ${type} field '${field}'`);
  }
}

function checkObjectTag(reader: FieldReader, expected: string): void {
  const tag = reader.raw('object');
  // The discriminator is documented on every record; tolerate its absence, but not a different record type.
  if (tag !== undefined && tag !== expected)
    reader.fail('object', `is ${JSON.stringify(tag)}, expected '${expected}'`);
}

function readKeyDescriptions(operation: Operation, reader: FieldReader, name: string): KeyDescription[] {
  return reader.array(name).map((item, index) => {
    const entry = new FieldReader(
      operation,
      item,
      `${reader.fieldPath(name)}[${index}]`,
      'a key description',
    );
    // An empty description may plausibly come back as null or be left out; nothing depends on it.
    return { key: entry.string('key'), description: entry.optionalString('description') ?? '' };
  });
}

/** Validates a Task (part 2.1). `path` locates it inside a larger answer, e.g. `data[4]`. */
export function parseTask(operation: Operation, value: unknown, path = ''): Task {
  const reader = new FieldReader(operation, value, path, 'a task');
  checkObjectTag(reader, 'task');
  const task: Task = {
    object: 'task',
    id: reader.id('id'),
    createdAt: reader.optionalString('createdAt') ?? '',
    key: reader.string('key'),
    description: reader.optionalString('description') ?? '',
    retryCount: reader.raw('retryCount') === undefined ? 0 : reader.number('retryCount'),
    inputKeys: readKeyDescriptions(operation, reader, 'inputKeys'),
    outputKeys: readKeyDescriptions(operation, reader, 'outputKeys'),
  };
  const updatedAt = reader.optionalString('updatedAt');
  if (updatedAt !== undefined) task.updatedAt = updatedAt;
  return task;
}

/**
 * Validates a TaskExecution (part 2.2): `id`, `taskId`, `status` strings and `input` an object are required.
 * When the answer is unusable but carries a non-empty string `id`, the error names it (`executionId`).
 */
export function parseTaskExecution(operation: Operation, value: unknown): TaskExecution {
  try {
    return readTaskExecution(operation, value);
  } catch (error) {
    const id = isPlainObject(value) ? value.id : undefined;
    if (error instanceof ResponseValidationError && typeof id === 'string' && id !== '') {
      throw new ResponseValidationError(error.operation, error.field, error.problem, id);
    }
    throw error;
  }
}

function readTaskExecution(operation: Operation, value: unknown): TaskExecution {
  const reader = new FieldReader(operation, value, '', 'a task execution');
  checkObjectTag(reader, 'task_execution');
  const execution: TaskExecution = {
    object: 'task_execution',
    id: reader.id('id'),
    taskId: reader.id('taskId'),
    createdAt: reader.optionalString('createdAt') ?? '',
    // Kept as the service sent it: a status added by a later API version must not make a claimed execution unreadable.
    status: reader.string('status') as TaskExecutionStatus,
    input: reader.object('input'),
  };
  const updatedAt = reader.optionalString('updatedAt');
  if (updatedAt !== undefined) execution.updatedAt = updatedAt;
  const output = reader.raw('output');
  if (output !== undefined && output !== null) execution.output = reader.object('output');
  return execution;
}

/** Validates the list envelope (part 2.13) and each element with `parseItem`. */
export function parseListEnvelope<T>(
  operation: Operation,
  value: unknown,
  parseItem: (operation: Operation, item: unknown, path: string) => T,
): ListEnvelope<T> {
  const reader = new FieldReader(operation, value, '', 'a list');
  checkObjectTag(reader, 'list');
  const totalElements = reader.number('totalElements');
  const data = reader.array('data').map((item, index) => parseItem(operation, item, `data[${index}]`));
  return { object: 'list', data, totalElements };
}

/** Validates a file record; its fields are undocumented (part 2.15), so only `id` is required. */
export function parseServiceFile(operation: Operation, value: unknown): ServiceFile {
  const reader = new FieldReader(operation, value, '', 'a file');
  reader.id('id');
  return value as ServiceFile;
}

/** Validates a job execution record; its fields are undocumented (part 2.15), so only `id` is required. */
export function parseJobExecution(operation: Operation, value: unknown): JobExecution {
  const reader = new FieldReader(operation, value, '', 'a job execution');
  reader.id('id');
  return value as JobExecution;
}

/** Validates a Variable (part 2.3): `id`, `key` and `value` strings are required. */
export function parseVariable(operation: Operation, value: unknown): Variable {
  const reader = new FieldReader(operation, value, '', 'a variable');
  checkObjectTag(reader, 'variable');
  const secret = reader.raw('secret');
  if (secret !== undefined && typeof secret !== 'boolean') reader.fail('secret', 'is not a boolean');
  const variable: Variable = {
    object: 'variable',
    id: reader.id('id'),
    createdAt: reader.optionalString('createdAt') ?? '',
    name: reader.optionalString('name') ?? '',
    key: reader.string('key'),
    value: reader.string('value'),
    secret: secret === true,
    status: reader.optionalString('status') ?? 'ACTIVE',
  };
  const updatedAt = reader.optionalString('updatedAt');
  if (updatedAt !== undefined) variable.updatedAt = updatedAt;
  return variable;
}
