// The service's custom-task records, as documented in the service API (part 2) and seen on the wire.
import type { JsonObject } from '../schema/json.ts';

export type { JsonObject } from '../schema/json.ts';
// The operations' names are the events' vocabulary too (a request's `response`, a 429's pause): kept there.
export { OPERATIONS, type Operation } from '../events/operations.ts';

export interface KeyDescription {
  key: string;
  description: string;
}

/** A custom task (object `task`). */
export interface Task {
  object: 'task';
  id: string;
  createdAt: string;
  updatedAt?: string;
  key: string;
  description: string;
  retryCount: number;
  inputKeys: KeyDescription[];
  outputKeys: KeyDescription[];
  /**
   * The fields the service sent beyond those above, as it sent them (e.g. a Conductor definition's
   * `timeoutSeconds`, `responseTimeoutSeconds`, `concurrentExecLimit`): kept so an update sends them back.
   */
  extraFields?: JsonObject;
}

/** The members of a task read for what they are; every other field of a task is one of its `extraFields`. */
export const TASK_FIELDS: readonly string[] = [
  'object',
  'id',
  'createdAt',
  'updatedAt',
  'key',
  'description',
  'retryCount',
  'inputKeys',
  'outputKeys',
];

/** What the client sends to create or update a task. */
export interface TaskDefinition {
  key: string;
  description: string;
  retryCount: number;
  inputKeys: KeyDescription[];
  outputKeys: KeyDescription[];
  /** Sent unchanged beside the members above (a PUT replaces the task: what it lacks, the service resets). */
  extraFields?: JsonObject;
}

export type TaskExecutionStatus = 'IN_PROGRESS' | 'COMPLETED' | 'FAILED';
/** The only statuses a client may report (part 3). */
export type ReportStatus = 'COMPLETED' | 'FAILED';

/** A task execution (object `task_execution`). */
export interface TaskExecution {
  object: 'task_execution';
  id: string;
  taskId: string;
  createdAt: string;
  updatedAt?: string;
  status: TaskExecutionStatus;
  input: JsonObject;
  output?: JsonObject;
}

/** The job context the service adds to an execution's input (not one of the task's input keys). */
export interface JobContext {
  jobAccountId?: string;
  jobId?: string;
  userAccountId?: string;
  userId?: string;
  [key: string]: unknown;
}

/** List envelope (part 2.13). */
export interface ListEnvelope<T> {
  object: 'list';
  data: T[];
  totalElements: number;
}

/** Error envelope (part 7). Some 400 and 413 answers carry only `message`. */
export interface ErrorEnvelope {
  date?: string;
  code?: string;
  message?: string;
  httpStatusCode?: number;
}

/** A file record of the v2 files API; its fields are not documented, so only `id` is relied upon. */
export interface ServiceFile {
  id: string;
  [key: string]: unknown;
}

/** A variable (object `variable`, part 2.3). */
export interface Variable {
  object: 'variable';
  id: string;
  createdAt: string;
  updatedAt?: string;
  name: string;
  key: string;
  /** A character string; the service may answer an empty string for a secret variable. */
  value: string;
  secret: boolean;
  /** `ACTIVE`; other values are not documented. */
  status: string;
}

/** What an update sends (part 4.7): a whole Variable may be passed, only these members go. */
export interface VariableUpdate {
  key: string;
  name: string;
  value: string;
  secret: boolean;
  /** Default `ACTIVE`. */
  status?: string;
}

/** A variable with its version, the `ETag` header as the service sent it (a quoted string). */
export interface VersionedVariable {
  variable: Variable;
  etag: string;
}

/** A job execution; its fields are not documented (part 2.15), so only `id` is relied upon. */
export interface JobExecution {
  id: string;
  [key: string]: unknown;
}

/**
 * A job execution (a run of a job) as the job-executions list shows it, with the members successor pacing
 * reads. The service's docs do not show them (part 2.15); its example task's README shows a finished one:
 * `{"object": "job_execution", "jobId", "id", "pipelineId", "createdAt", "endedAt", "input", "startedAt",
 * "status": "COMPLETED", "output", "info"}` (Product-Live/data-factory-task-example). Which step a run is at
 * is not shown, so none is read; every other member is kept as it came.
 */
export interface JobRunRecord extends JobExecution {
  /** The job run: what an execution's `input.context.jobId` names. */
  jobId: string;
  status: string;
  /** When the run was created (the list is read newest first by it). */
  createdAt: string;
  startedAt?: string | null;
  endedAt?: string | null;
}

/**
 * A job definition as the service lists it (part 4.6: its fields are not shown). The service's example job
 * has `key`, `title` and `tasks` (each `{"name", "taskReferenceName", "type", ...}`, a custom task being
 * `"type": "SUB_WORKFLOW"` named `<account>/<task key>`); every member is kept as it came.
 */
export interface Job {
  [key: string]: unknown;
}
