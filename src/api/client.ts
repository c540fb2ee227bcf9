// ServiceClient: the only code that speaks to the service. Each method is one request (listTasks: one per
// page), awaited through the budget gate, validated at the boundary, told once as a `response` event. What
// every request stands on (the channel, the paths' spelling, siblings on the same connections) is
// request-client.ts's; how a request is sent and its answer observed is request-channel.ts's.
import type { ExecutionReport, FileUpload, VariableUpdateOptions } from './client-options.ts';
import {
  checkPageSize,
  MAX_PAGE_SIZE,
  serializeReport,
  serializeTask,
  serializeVariable,
  toBlob,
} from './outgoing.ts';
import { RequestClient } from './request-client.ts';
import type { Operation } from '../events/operations.ts';
import { checkUploadSize } from './file-limits.ts';
import { parseJsonBody } from './response.ts';
import { isPlainObject } from '../schema/plain-object.ts';
import {
  parseJob,
  parseJobExecution,
  parseJobRun,
  parseListEnvelope,
  parseServiceFile,
  parseTask,
  parseTaskExecution,
} from './validate.ts';
import type {
  Job,
  JobExecution,
  JobRunRecord,
  JsonObject,
  ListEnvelope,
  ServiceFile,
  Task,
  TaskDefinition,
  TaskExecution,
  VariableUpdate,
  VersionedVariable,
} from './types.ts';

export type {
  ExecutionReport,
  FileUpload,
  GateAnswer,
  RequestGate,
  ResponseEvent,
  SendPermit,
  ServiceClientOptions,
  ServiceTransport,
  VariableUpdateOptions,
} from './client-options.ts';

export class ServiceClient extends RequestClient {
  /** Every task, following pages until `totalElements` are collected or a page comes back empty. */
  async listTasks(options: { pageSize?: number; signal?: AbortSignal } = {}): Promise<Task[]> {
    const size = options.pageSize ?? MAX_PAGE_SIZE;
    checkPageSize(size);
    const tasks: Task[] = [];
    for (let page = 0; ; page++) {
      const envelope = await this.listTasksPage(page, size, options.signal);
      tasks.push(...envelope.data);
      if (envelope.data.length === 0 || tasks.length >= envelope.totalElements) return tasks;
    }
  }

  /** One page of tasks; `page` is zero-based, `size` at most 1000. */
  async listTasksPage(page: number, size: number, signal?: AbortSignal): Promise<ListEnvelope<Task>> {
    if (!Number.isInteger(page) || page < 0)
      throw new RangeError(`page must be an integer >= 0, got ${page}`);
    checkPageSize(size);
    // Under `auto`, the first list is the probe itself: its answer is the page asked for.
    if (this.pathStyle.style === undefined) {
      const probed = await this.pathStyle.resolve(
        (paths) => this.listPage(paths, page, size, signal),
        this.channel.urlSetting,
      );
      if (probed !== undefined) return probed;
    }
    return await this.listPage(this.paths(), page, size, signal);
  }

  async getTask(id: string, signal?: AbortSignal): Promise<Task> {
    return await this.record('tasks.get', 'GET', (p) => p.task(id), parseTask, signal);
  }

  async createTask(definition: TaskDefinition, signal?: AbortSignal): Promise<Task> {
    const body = serializeTask(definition);
    return await this.record('tasks.create', 'POST', (p) => p.tasks(), parseTask, signal, { body });
  }

  /**
   * Replaces the task's definition. The service resets what a PUT lacks, so pass the task's `extraFields` (a
   * Task read from the service may be passed whole): they go back unchanged beside the definition.
   */
  async updateTask(id: string, definition: TaskDefinition, signal?: AbortSignal): Promise<Task> {
    const body = serializeTask(definition, id);
    return await this.record('tasks.update', 'PUT', (p) => p.task(id), parseTask, signal, { body });
  }

  async deleteTask(id: string, signal?: AbortSignal): Promise<void> {
    // The service answers a bare success status (part 4.1); whatever body comes with it is ignored.
    return await this.send(
      'tasks.delete',
      'DELETE',
      (p) => p.task(id),
      signal,
      (answer) => {
        this.channel.ensureSuccess('tasks.delete', answer);
      },
    );
  }

  /**
   * The next pending execution of the task, now claimed by this client; null when none is pending (404 NOT_FOUND).
   * `signal` cancels the poll only while it waits for the budget gate: once sent, it runs to its answer or its
   * timeouts, because the service claims the execution when it answers and a dropped answer would lose it.
   * `cut` aborts it even once sent (rejecting with its reason): the caller's last resort, its answer lost.
   */
  async pollTask(taskId: string, signal?: AbortSignal, cut?: AbortSignal): Promise<TaskExecution | null> {
    return await this.send(
      'tasks.poll',
      'GET',
      (p) => p.poll(taskId),
      signal,
      (answer) => {
        if (answer.status === 404) {
          const error = this.channel.serviceError('tasks.poll', answer);
          // Only the service's NOT_FOUND envelope says "nothing pending". Any other 404 (an HTML page, an empty
          // body, a `{message}` of a route the server does not have) is a wrong URL, spelling or proxy: reading
          // it as null would poll an empty queue forever without anyone noticing.
          if (error.code === 'NOT_FOUND') return null;
          throw error;
        }
        this.channel.ensureSuccess('tasks.poll', answer);
        return parseTaskExecution('tasks.poll', parseJsonBody('tasks.poll', answer));
      },
      { call: { sentSignal: cut ?? null } },
    );
  }

  async getExecution(id: string, signal?: AbortSignal): Promise<TaskExecution> {
    return await this.record('executions.get', 'GET', (p) => p.execution(id), parseTaskExecution, signal);
  }

  /**
   * Reports the outcome of a claimed execution. Rejects with ReportValidationError, sending nothing, when the
   * status is not COMPLETED/FAILED or the output is not a plain JSON object. `beforeSend` runs once the budget
   * let the report through, right before it leaves: its rejection sends nothing (a fence of clustered mode).
   */
  async reportExecution(
    id: string,
    report: ExecutionReport,
    signal?: AbortSignal,
    beforeSend?: () => Promise<void>,
  ): Promise<TaskExecution> {
    const body = serializeReport(id, report);
    return await this.record(
      'executions.report',
      'PATCH',
      (p) => p.execution(id),
      parseTaskExecution,
      signal,
      {
        body,
        call: beforeSend ? { beforeSend } : {},
      },
    );
  }

  /**
   * Uploads one file to the v2 files API as multipart/form-data, part name `file`; 201 gives the file record.
   * A file over the service's 100 MB is refused with UploadTooLargeError, nothing sent. The service deletes
   * uploaded files after 90 days.
   */
  async uploadFile(file: FileUpload, signal?: AbortSignal): Promise<ServiceFile> {
    const blob = toBlob(file);
    checkUploadSize(file.name, blob.size);
    if (this.pathStyle.style === undefined) await this.resolvePathStyle(signal);
    const form = new FormData();
    form.append('file', blob, file.name);
    return await this.record('files.upload', 'POST', (p) => p.files(), parseServiceFile, signal, {
      body: form,
    });
  }

  /** The v2 file record with this id; 404 when there is none. */
  async getFile(id: string, signal?: AbortSignal): Promise<ServiceFile> {
    return await this.record('files.get', 'GET', (p) => p.file(id), parseServiceFile, signal);
  }

  /** The variable with its version (`etag`, from the ETag header) for a later conditional update. */
  async getVariable(id: string, signal?: AbortSignal): Promise<VersionedVariable> {
    const versioned = this.channel.versioned('variables.get');
    return await this.send('variables.get', 'GET', (p) => p.variable(id), signal, versioned);
  }

  /**
   * Replaces the variable's key, name, value, secret and status; with `ifMatch`, only if it still has that
   * version: otherwise rejects with PreconditionFailedError and nothing changes. Resolves the new version.
   */
  async updateVariable(
    id: string,
    update: VariableUpdate,
    options: VariableUpdateOptions = {},
  ): Promise<VersionedVariable> {
    const body = serializeVariable(id, update);
    const versioned = this.channel.versioned('variables.update');
    return await this.send('variables.update', 'PUT', (p) => p.variable(id), options.signal, versioned, {
      body,
      ...(options.ifMatch === undefined ? {} : { headers: { 'if-match': options.ifMatch } }),
    });
  }

  /**
   * Every job definition, following pages like listTasks (one request a page, each through the budget). Each
   * record is kept as the service sent it: its fields are not documented (part 4.6).
   */
  async listJobs(options: { pageSize?: number; signal?: AbortSignal } = {}): Promise<Job[]> {
    const size = options.pageSize ?? MAX_PAGE_SIZE;
    checkPageSize(size);
    const jobs: Job[] = [];
    const parse = (operation: Operation, value: unknown) => parseListEnvelope(operation, value, parseJob);
    for (let page = 0; ; page++) {
      const query = { page: String(page), size: String(size) };
      const envelope = await this.record('jobs.list', 'GET', (p) => p.jobs(), parse, options.signal, {
        query,
      });
      jobs.push(...envelope.data);
      if (envelope.data.length === 0 || jobs.length >= envelope.totalElements) return jobs;
    }
  }

  /**
   * One page of the job executions (the runs of jobs), newest first: `sort=createdAt&sortOrder=DESC` (the
   * service does not list which sort values it accepts, part 4; the caller checks the order it got). One
   * request through the budget; a run lacking `jobId`, `status` or `createdAt` fails the page (ResponseValidationError).
   */
  async listJobExecutions(
    options: { page?: number; pageSize?: number; signal?: AbortSignal } = {},
  ): Promise<ListEnvelope<JobRunRecord>> {
    const size = options.pageSize ?? MAX_PAGE_SIZE;
    checkPageSize(size);
    const query = {
      page: String(options.page ?? 0),
      size: String(size),
      sort: 'createdAt',
      sortOrder: 'DESC',
    };
    const parse = (operation: Operation, value: unknown) => parseListEnvelope(operation, value, parseJobRun);
    return await this.record('jobExecutions.list', 'GET', (p) => p.jobExecutions(), parse, options.signal, {
      query,
    });
  }

  async getJobExecution(id: string, signal?: AbortSignal): Promise<JobExecution> {
    return await this.record(
      'jobExecutions.get',
      'GET',
      (p) => p.jobExecution(id),
      parseJobExecution,
      signal,
    );
  }

  /** Starts a job execution; the body's members are not documented by the service (part 4.5). */
  async createJobExecution(body: JsonObject, signal?: AbortSignal): Promise<JobExecution> {
    if (!isPlainObject(body)) {
      throw new TypeError('createJobExecution needs a plain JSON object as its body; nothing was sent');
    }
    return await this.record(
      'jobExecutions.create',
      'POST',
      (p) => p.jobExecutions(),
      parseJobExecution,
      signal,
      {
        body: JSON.stringify(body),
      },
    );
  }
}
