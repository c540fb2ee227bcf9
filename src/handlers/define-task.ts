// How a user declares a custom task: `export default defineTask({ key, inputKeys, handle })` in a handler module.
// Validation is eager so a mistake fails when the daemon loads the file, not on the first execution hours later.
import type { Span } from '@opentelemetry/api';
import type { Logger } from 'pino';
import * as v from 'valibot';
import type { JobContext, JsonObject, KeyDescription, TaskExecution } from '../api/types.ts';
import { issuePath, record } from '../schema/record.ts';
import type { TaskServiceClient } from './task-service.ts';
import type { ErrorCode } from '../errors/catalogue.ts';

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
  /**
   * A private folder for this attempt's scratch files (mode 0700, under the OS temp folder, TMPDIR), made on
   * first read and removed with everything in it once the attempt ends: returned, thrown, timed out or
   * aborted, in every DF_HANDLER_ISOLATION. Each attempt (a retry too) gets its own.
   */
  readonly tmpDir: string;
  /**
   * This attempt's span (`df-worker.attempt`) when df-worker exports traces (OTEL_EXPORTER_OTLP_ENDPOINT set),
   * else a span that records nothing. Add attributes and events to it; spans the handler starts with
   * `trace.getTracer(name).startActiveSpan(...)` nest under it, in every DF_HANDLER_ISOLATION. In a worker
   * (thread or process) it forwards its calls to the daemon's span: `end()` is the daemon's to call.
   */
  span: Span;
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
  /**
   * Executions of this task run at once at most (the official NestJS module's `maxParallelRuns`), within
   * DF_CONCURRENCY: while this many run, the task is not polled. Positive integer. Default: no limit of its
   * own, so a worker serving one task uses every slot as before; beside other tasks it is still kept from the
   * last free slot once it holds its fair share (see `src/scheduler/slot-share.ts`).
   */
  concurrency?: number;
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
  readonly concurrency?: number;
  handle(input: I, ctx: TaskContext): O | Promise<O>;
}

/** Thrown by a handler to fail the execution at once: the runner does not retry it (bad input, a 4xx answer...). */
export class NonRetryableError extends Error {
  readonly code: ErrorCode = 'DFW_HANDLER_NON_RETRYABLE';

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
  readonly code: ErrorCode = 'DFW_TASK_DEFINITION_INVALID';
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

type Got = (issue: v.BaseIssue<unknown>) => string;
const gotValue =
  (expected: string): Got =>
  (issue) =>
    `${expected}, got ${describeValue(issue.input)}`;
const gotType =
  (expected: string): Got =>
  (issue) =>
    `${expected}, got ${describeType(issue.input)}`;

const nonEmpty = gotValue('must be a non-empty string');
const keyName = v.pipe(
  v.string(nonEmpty),
  v.check((key) => key.trim() !== '', nonEmpty),
);
const describedKey = record(
  { key: keyName, description: v.optional(v.string(gotType('must be a string'))) },
  gotType('must be a string or {key, description}'),
);
/** A string is shorthand for `{ key, description: '' }`. */
const keyEntry = v.lazy((entry) => (typeof entry === 'string' ? keyName : describedKey));
const keyList = v.optional(v.array(keyEntry, gotType('must be an array of strings or {key, description}')));
const retryCount = gotValue('must be an integer >= 0');
const timeoutMs = gotValue('must be a positive integer (milliseconds)');
const concurrency = gotValue('must be a positive integer (executions at once)');

// Members in the order their problems are listed.
const specSchema = record(
  {
    key: keyName,
    handle: v.custom<TaskSpec['handle']>(
      (value) => typeof value === 'function',
      gotType('must be a function'),
    ),
    description: v.optional(v.string(gotType('must be a string'))),
    retryCount: v.optional(
      v.pipe(v.number(retryCount), v.safeInteger(retryCount), v.minValue(0, retryCount)),
    ),
    timeoutMs: v.optional(
      v.pipe(
        v.number(timeoutMs),
        v.safeInteger(timeoutMs),
        v.minValue(1, timeoutMs),
        // Node's timers fire after 1 ms for any longer delay, which would time every attempt out at once.
        v.maxValue(
          MAX_TIMEOUT_MS,
          (issue) => `must be at most ${MAX_TIMEOUT_MS} ms (about 24.8 days), got ${String(issue.input)}`,
        ),
      ),
    ),
    concurrency: v.optional(
      v.pipe(v.number(concurrency), v.safeInteger(concurrency), v.minValue(1, concurrency)),
    ),
    inputKeys: keyList,
    outputKeys: keyList,
  },
  gotType('expected an object'),
);
const KNOWN_MEMBERS = Object.keys(specSchema.pipe[1].entries);

/** True for an object returned by `defineTask` (by this or another copy of df-worker). */
export function isTaskModule(value: unknown): value is TaskModule {
  return typeof value === 'object' && value !== null && TASK_MODULE_BRAND in value;
}

/** Validates a task spec and returns it normalised; throws TaskDefinitionError naming every bad member. */
export function defineTask<I extends JsonObject = JsonObject, O extends JsonObject = JsonObject>(
  spec: TaskSpec<I, O>,
): TaskModule<I, O> {
  const raw: unknown = spec;
  const result = v.safeParse(specSchema, raw, { abortPipeEarly: true });
  const problems = (result.issues ?? []).map((issue): TaskDefinitionProblem => ({
    member: issuePath(issue) || 'spec',
    message: issue.message,
  }));
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    throw new TaskDefinitionError(problems, undefined);
  }
  const record = raw as Record<string, unknown>;
  const taskKey = v.is(keyName, record.key) ? record.key : undefined;
  for (const member of Object.keys(record)) {
    if (!KNOWN_MEMBERS.includes(member)) {
      problems.push({ member, message: `unknown member; expected one of ${KNOWN_MEMBERS.join(', ')}` });
    }
  }
  const inputKeys = normaliseKeys(record.inputKeys, 'inputKeys', problems);
  const outputKeys = normaliseKeys(record.outputKeys, 'outputKeys', problems);
  problems.sort((a, b) => compareMembers(a.member, b.member));
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
    ...(record.concurrency === undefined ? {} : { concurrency: record.concurrency as number }),
    handle: spec.handle.bind(spec),
  };
  Object.defineProperty(module, TASK_MODULE_BRAND, { value: true });
  return Object.freeze(module);
}

/**
 * Orders problems as a reader goes down the spec: by member, in the schema's order (an unknown member, often a
 * misspelt one, right after `key`), then by entry within a key list.
 */
function compareMembers(a: string, b: string): number {
  const [rankA, indexA] = position(a);
  const [rankB, indexB] = position(b);
  return rankA - rankB || indexA - indexB;
}

function position(member: string): [rank: number, index: number] {
  const [, name = member, index] = /^(\w+)(?:\[(\d+)\])?/.exec(member) ?? [];
  const rank = KNOWN_MEMBERS.indexOf(name);
  return [rank < 0 ? 0.5 : rank, index === undefined ? -1 : Number(index)];
}

/** The valid entries of a key list (the schema reported the others), each key once. */
function normaliseKeys(value: unknown, member: string, problems: TaskDefinitionProblem[]): KeyDescription[] {
  if (!Array.isArray(value)) return [];
  const keys: KeyDescription[] = [];
  value.forEach((entry: unknown, index) => {
    if (!v.is(keyEntry, entry)) return;
    const described =
      typeof entry === 'string'
        ? { key: entry, description: '' }
        : (entry as Partial<KeyDescription> & { key: string });
    if (keys.some((k) => k.key === described.key)) {
      problems.push({
        member: `${member}[${index}]`,
        message: `duplicate key "${described.key}"; each key may appear once`,
      });
      return;
    }
    keys.push({ key: described.key, description: described.description ?? '' });
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
