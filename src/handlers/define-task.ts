// How a user declares a custom task: `export default defineTask({ key, inputKeys, handle })` in a handler module.
// Validation is eager so a mistake fails when the daemon loads the file, not on the first execution hours later.
import type { Logger } from 'pino';
import type { JobContext, JsonObject, KeyDescription, TaskExecution } from '../api/types.ts';
import type { TaskServiceClient } from './task-service.ts';

/** The task an execution belongs to, as the runner sees it: the service's record, or the handler's own declarations when run locally. */
export interface TaskSummary {
  /** The service's task id; absent when the task is run locally. */
  id?: string;
  key: string;
  /** How many times a failed attempt is retried (so `retryCount + 1` attempts at most). */
  retryCount: number;
  inputKeys: KeyDescription[];
  outputKeys: KeyDescription[];
}

/** What a handler receives next to its input. */
export interface TaskContext {
  /** The execution as polled; its `input` still holds the service's `context`. */
  execution: TaskExecution;
  task: TaskSummary;
  /** 1-based attempt number within this execution. */
  attempt: number;
  /** The job context the service adds to every execution's input (`input.context`), or `{}` when absent. */
  job: JobContext;
  /** Child logger bound to `{ taskKey, executionId, attempt }`. */
  logger: Logger;
  /** Aborts when the attempt times out or the worker shuts down: pass it to `fetch` and other cancellable work. */
  signal: AbortSignal;
  /**
   * The service, through df-worker's own client and request budget (the API key stays with the daemon):
   * files, this and other task executions, variables, job executions. See TaskServiceClient.
   */
  service: TaskServiceClient;
}

/**
 * A task as a user writes it. Declare `I` and `O` with `type` aliases, not interfaces: an interface has no index
 * signature, so TypeScript does not accept it as a `JsonObject`.
 */
export interface TaskSpec<I extends JsonObject = JsonObject, O extends JsonObject = JsonObject> {
  /** The custom task key the service knows this task by; one handler module per key. */
  key: string;
  /** Shown in the service's UI. Default `''`. */
  description?: string;
  /** Retries after a failed attempt (used when syncing the task to the service). Integer >= 0, default 0. */
  retryCount?: number;
  /** Input keys the handler needs; a string is shorthand for `{ key, description: '' }`. Default `[]`. */
  inputKeys?: Array<string | KeyDescription>;
  /** Output keys the handler promises; a string is shorthand for `{ key, description: '' }`. Default `[]`. */
  outputKeys?: Array<string | KeyDescription>;
  /**
   * Time limit per attempt, in milliseconds (positive integer, at most 2147483647). Default: the daemon's configured
   * timeout (DF_HANDLER_TIMEOUT_MS); a declared one applies instead, shorter or longer.
   */
  timeoutMs?: number;
  /** Runs one attempt. `input` excludes the service's `context` (see `ctx.job`). Throw to fail; see NonRetryableError. */
  handle(input: I, ctx: TaskContext): O | Promise<O>;
}

/** A validated task, as `defineTask` returns it: every optional member filled in and keys normalised. */
export interface TaskModule<I extends JsonObject = JsonObject, O extends JsonObject = JsonObject> {
  readonly key: string;
  readonly description: string;
  readonly retryCount: number;
  readonly inputKeys: KeyDescription[];
  readonly outputKeys: KeyDescription[];
  readonly timeoutMs?: number;
  handle(input: I, ctx: TaskContext): O | Promise<O>;
}

/** Thrown by a handler to fail the execution at once: the runner does not retry it (bad input, a 4xx answer...). */
export class NonRetryableError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'NonRetryableError';
    // The brand survives a second copy of this module (e.g. a handler importing df-worker from another path).
    Object.defineProperty(this, NON_RETRYABLE_BRAND, { value: true });
  }
}

/** True for a NonRetryableError, including one made by another copy of this module. Never throws. */
export function isNonRetryableError(error: unknown): boolean {
  try {
    return (
      error instanceof NonRetryableError ||
      (typeof error === 'object' && error !== null && NON_RETRYABLE_BRAND in error)
    );
  } catch {
    return false; // a thrown proxy whose getPrototypeOf or has trap throws
  }
}

export interface TaskDefinitionProblem {
  /** The member of the spec that is wrong, e.g. `retryCount` or `inputKeys[2]`. */
  member: string;
  message: string;
}

/** A task spec that `defineTask` rejects; lists every problem found. */
export class TaskDefinitionError extends Error {
  /** The first bad member (see `problems` for all of them). */
  readonly member: string;
  readonly problems: TaskDefinitionProblem[];
  /** The task key, when the spec has a usable one. */
  readonly taskKey: string | undefined;

  constructor(problems: TaskDefinitionProblem[], taskKey: string | undefined) {
    const subject = taskKey === undefined ? 'task definition' : `task "${taskKey}"`;
    const list = problems.map((p) => `${p.member}: ${p.message}`).join('; ');
    super(`invalid ${subject}: ${list}. Fix the defineTask({...}) call in the handler module.`);
    this.name = 'TaskDefinitionError';
    this.member = problems[0]?.member ?? 'spec';
    this.problems = problems;
    this.taskKey = taskKey;
  }
}

/** The longest `timeoutMs` a task may declare: the largest delay Node's timers honour (2^31 - 1 ms). */
const MAX_TIMEOUT_MS = 2_147_483_647;

const TASK_MODULE_BRAND = Symbol.for('df-worker.TaskModule');
const NON_RETRYABLE_BRAND = Symbol.for('df-worker.NonRetryableError');
const KNOWN_MEMBERS = new Set([
  'key',
  'description',
  'retryCount',
  'inputKeys',
  'outputKeys',
  'timeoutMs',
  'handle',
]);

/** True for an object returned by `defineTask` (by this or another copy of df-worker). */
export function isTaskModule(value: unknown): value is TaskModule {
  return typeof value === 'object' && value !== null && TASK_MODULE_BRAND in value;
}

/** Validates a task spec and returns it normalised; throws TaskDefinitionError naming every bad member. */
export function defineTask<I extends JsonObject = JsonObject, O extends JsonObject = JsonObject>(
  spec: TaskSpec<I, O>,
): TaskModule<I, O> {
  const raw: unknown = spec;
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    throw new TaskDefinitionError(
      [{ member: 'spec', message: `expected an object, got ${describeType(raw)}` }],
      undefined,
    );
  }
  const record = raw as Record<string, unknown>;
  const problems: TaskDefinitionProblem[] = [];
  const taskKey = validKey(record.key, 'key', problems);

  for (const member of Object.keys(record)) {
    if (!KNOWN_MEMBERS.has(member)) {
      problems.push({
        member,
        message: `unknown member; expected one of ${[...KNOWN_MEMBERS].join(', ')}`,
      });
    }
  }
  if (typeof record.handle !== 'function') {
    problems.push({ member: 'handle', message: `must be a function, got ${describeType(record.handle)}` });
  }
  if (record.description !== undefined && typeof record.description !== 'string') {
    problems.push({
      member: 'description',
      message: `must be a string, got ${describeType(record.description)}`,
    });
  }
  if (
    record.retryCount !== undefined &&
    !(Number.isSafeInteger(record.retryCount) && Number(record.retryCount) >= 0)
  ) {
    problems.push({
      member: 'retryCount',
      message: `must be an integer >= 0, got ${describeValue(record.retryCount)}`,
    });
  }
  if (
    record.timeoutMs !== undefined &&
    !(Number.isSafeInteger(record.timeoutMs) && Number(record.timeoutMs) > 0)
  ) {
    problems.push({
      member: 'timeoutMs',
      message: `must be a positive integer (milliseconds), got ${describeValue(record.timeoutMs)}`,
    });
  } else if (typeof record.timeoutMs === 'number' && record.timeoutMs > MAX_TIMEOUT_MS) {
    // Node's timers fire after 1 ms for any longer delay, which would time every attempt out at once.
    problems.push({
      member: 'timeoutMs',
      message: `must be at most ${MAX_TIMEOUT_MS} ms (about 24.8 days), got ${record.timeoutMs}`,
    });
  }
  const inputKeys = normaliseKeys(record.inputKeys, 'inputKeys', problems);
  const outputKeys = normaliseKeys(record.outputKeys, 'outputKeys', problems);
  if (inputKeys.some((k) => k.key === 'context')) {
    problems.push({
      member: 'inputKeys',
      message:
        'must not declare "context": the service adds it to every execution\'s input; read it from ctx.job',
    });
  }
  if (problems.length > 0 || taskKey === undefined) throw new TaskDefinitionError(problems, taskKey);

  const module: TaskModule<I, O> = {
    key: taskKey,
    description: (record.description as string | undefined) ?? '',
    retryCount: (record.retryCount as number | undefined) ?? 0,
    inputKeys,
    outputKeys,
    ...(record.timeoutMs === undefined ? {} : { timeoutMs: record.timeoutMs as number }),
    handle: spec.handle.bind(spec),
  };
  Object.defineProperty(module, TASK_MODULE_BRAND, { value: true });
  return Object.freeze(module);
}

function validKey(value: unknown, member: string, problems: TaskDefinitionProblem[]): string | undefined {
  if (typeof value === 'string' && value.trim() !== '') return value;
  problems.push({ member, message: `must be a non-empty string, got ${describeValue(value)}` });
  return undefined;
}

function normaliseKeys(value: unknown, member: string, problems: TaskDefinitionProblem[]): KeyDescription[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) {
    problems.push({
      member,
      message: `must be an array of strings or {key, description}, got ${describeType(value)}`,
    });
    return [];
  }
  const keys: KeyDescription[] = [];
  const seen = new Set<string>();
  value.forEach((entry: unknown, index) => {
    const entryMember = `${member}[${index}]`;
    let described: KeyDescription | undefined;
    if (typeof entry === 'string') {
      const key = validKey(entry, entryMember, problems);
      if (key !== undefined) described = { key, description: '' };
    } else if (typeof entry === 'object' && entry !== null && !Array.isArray(entry)) {
      const { key: rawKey, description } = entry as Record<string, unknown>;
      const key = validKey(rawKey, `${entryMember}.key`, problems);
      if (description !== undefined && typeof description !== 'string') {
        problems.push({
          member: `${entryMember}.description`,
          message: `must be a string, got ${describeType(description)}`,
        });
      } else if (key !== undefined) {
        described = { key, description: description ?? '' };
      }
    } else {
      problems.push({
        member: entryMember,
        message: `must be a string or {key, description}, got ${describeType(entry)}`,
      });
    }
    if (described === undefined) return;
    if (seen.has(described.key)) {
      problems.push({
        member: entryMember,
        message: `duplicate key "${described.key}"; each key may appear once`,
      });
      return;
    }
    seen.add(described.key);
    keys.push(described);
  });
  return keys;
}

function describeType(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value;
}

function describeValue(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  return describeType(value);
}
