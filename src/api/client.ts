// ServiceClient: the only code that speaks to the service. Each method is one request (listTasks: one per
// page), awaited through the budget gate, validated at the boundary, told once as a `response` event; how a
// request is sent and its answer observed is the request channel's (request-channel.ts).
import type { ServiceClock } from '../clock/service-clock.ts';
import type {
  ExecutionReport,
  FileUpload,
  RequestGate,
  ServiceClientOptions,
  ServiceTransport,
  VariableUpdateOptions,
} from './client-options.ts';
import {
  checkPageSize,
  MAX_PAGE_SIZE,
  serializeReport,
  serializeTask,
  serializeVariable,
  toBlob,
} from './outgoing.ts';
import type { ServicePaths } from './paths.ts';
import { checkUploadSize } from './file-limits.ts';
import { PathStyleHolder, type PathStyleResolution, type PathStyleSetting } from './path-style.ts';
import { RequestChannel, type AttemptRef, type AuthMode } from './request-channel.ts';
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
  ServiceClientOptions,
  ServiceTransport,
  VariableUpdateOptions,
} from './client-options.ts';

export class ServiceClient {
  readonly #channel: RequestChannel;
  /** The spelling of the paths, found by a probe before the first request under `auto`; shared with siblings. */
  readonly #pathStyle: PathStyleHolder;
  readonly #options: ServiceClientOptions;
  /** The service's clock, learnt from its answers' Date headers: where its createdAt instants fall locally. */
  readonly serviceClock: ServiceClock;

  /**
   * `shared`: a sibling made by withGate() or forAttempt() uses the transport of the client that made it (and
   * one made by forAttempt() names its attempt).
   */
  constructor(
    options: ServiceClientOptions,
    shared?: { transport: ServiceTransport; pathStyle: PathStyleHolder; attempt?: AttemptRef },
  ) {
    this.#channel = new RequestChannel(options, shared?.transport, shared?.attempt);
    this.serviceClock = this.#channel.serviceClock;
    this.#pathStyle =
      shared?.pathStyle ?? new PathStyleHolder(options.pathStyle ?? 'hyphen', this.#channel.basePath);
    this.#options = options;
  }

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
    if (this.#pathStyle.style === undefined) {
      const probed = await this.#pathStyle.resolve(
        (paths) => this.#listPage(paths, page, size, signal),
        this.#channel.urlSetting,
      );
      if (probed !== undefined) return probed;
    }
    return await this.#listPage(this.#paths(), page, size, signal);
  }

  async getTask(id: string, signal?: AbortSignal): Promise<Task> {
    if (this.#pathStyle.style === undefined) await this.resolvePathStyle(signal);
    return await this.#channel.call(
      'tasks.get',
      this.#channel.request('GET', this.#paths().task(id)),
      signal,
      this.#channel.json('tasks.get', parseTask),
    );
  }

  async createTask(definition: TaskDefinition, signal?: AbortSignal): Promise<Task> {
    if (this.#pathStyle.style === undefined) await this.resolvePathStyle(signal);
    return await this.#channel.call(
      'tasks.create',
      this.#channel.request('POST', this.#paths().tasks(), undefined, serializeTask(definition)),
      signal,
      this.#channel.json('tasks.create', parseTask),
    );
  }

  /**
   * Replaces the task's definition. The service resets what a PUT lacks, so pass the task's `extraFields` (a
   * Task read from the service may be passed whole): they go back unchanged beside the definition.
   */
  async updateTask(id: string, definition: TaskDefinition, signal?: AbortSignal): Promise<Task> {
    if (this.#pathStyle.style === undefined) await this.resolvePathStyle(signal);
    return await this.#channel.call(
      'tasks.update',
      this.#channel.request('PUT', this.#paths().task(id), undefined, serializeTask(definition, id)),
      signal,
      this.#channel.json('tasks.update', parseTask),
    );
  }

  async deleteTask(id: string, signal?: AbortSignal): Promise<void> {
    if (this.#pathStyle.style === undefined) await this.resolvePathStyle(signal);
    // The service answers a bare success status (part 4.1); whatever body comes with it is ignored.
    return await this.#channel.call(
      'tasks.delete',
      this.#channel.request('DELETE', this.#paths().task(id)),
      signal,
      (answer) => {
        this.#channel.ensureSuccess('tasks.delete', answer);
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
    if (this.#pathStyle.style === undefined) await this.resolvePathStyle(signal);
    return await this.#channel.call(
      'tasks.poll',
      this.#channel.request('GET', this.#paths().poll(taskId)),
      signal,
      (answer) => {
        if (answer.status === 404) {
          const error = this.#channel.serviceError('tasks.poll', answer);
          // Only the service's NOT_FOUND envelope says "nothing pending". Any other 404 (an HTML page, an empty
          // body, a `{message}` of a route the server does not have) is a wrong URL, spelling or proxy: reading
          // it as null would poll an empty queue forever without anyone noticing.
          if (error.code === 'NOT_FOUND') return null;
          throw error;
        }
        this.#channel.ensureSuccess('tasks.poll', answer);
        return parseTaskExecution('tasks.poll', parseJsonBody('tasks.poll', answer));
      },
      { sentSignal: cut ?? null },
    );
  }

  async getExecution(id: string, signal?: AbortSignal): Promise<TaskExecution> {
    if (this.#pathStyle.style === undefined) await this.resolvePathStyle(signal);
    return await this.#channel.call(
      'executions.get',
      this.#channel.request('GET', this.#paths().execution(id)),
      signal,
      this.#channel.json('executions.get', parseTaskExecution),
    );
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
    if (this.#pathStyle.style === undefined) await this.resolvePathStyle(signal);
    return await this.#channel.call(
      'executions.report',
      this.#channel.request('PATCH', this.#paths().execution(id), undefined, body),
      signal,
      this.#channel.json('executions.report', parseTaskExecution),
      { ...(beforeSend ? { beforeSend } : {}) },
    );
  }

  /**
   * A client for the same service and key whose requests wait on `gate` instead: the daemon's handlers get one
   * whose requests rank below reports in the shared budget. It shares this client's connections; closing it
   * refuses its later calls but leaves the connections to this client.
   */
  withGate(gate: RequestGate): ServiceClient {
    return new ServiceClient(
      { ...this.#options, gate },
      { transport: this.#channel.transport, pathStyle: this.#pathStyle },
    );
  }

  /**
   * The client of one handler attempt's `ctx.service`: each of its requests is also told as that attempt's
   * `serviceCall` (for its trace), after its `response`. It shares this client's connections, as withGate's
   * does. While nobody listens to `serviceCall` (no traces) it is this client itself: no cost.
   */
  forAttempt(attempt: AttemptRef): ServiceClient {
    const events = this.#options.events;
    if (!events || events.listenerCount('serviceCall') === 0) return this;
    return new ServiceClient(this.#options, {
      transport: this.#channel.transport,
      pathStyle: this.#pathStyle,
      attempt: { ...attempt },
    });
  }

  /**
   * Uploads one file to the v2 files API as multipart/form-data, part name `file`; 201 gives the file record.
   * A file over the service's 100 MB is refused with UploadTooLargeError, nothing sent. The service deletes
   * uploaded files after 90 days.
   */
  async uploadFile(file: FileUpload, signal?: AbortSignal): Promise<ServiceFile> {
    const blob = toBlob(file);
    checkUploadSize(file.name, blob.size);
    if (this.#pathStyle.style === undefined) await this.resolvePathStyle(signal);
    const form = new FormData();
    form.append('file', blob, file.name);
    return await this.#channel.call(
      'files.upload',
      this.#channel.request('POST', this.#paths().files(), undefined, form),
      signal,
      this.#channel.json('files.upload', parseServiceFile),
    );
  }

  /** The v2 file record with this id; 404 when there is none. */
  async getFile(id: string, signal?: AbortSignal): Promise<ServiceFile> {
    if (this.#pathStyle.style === undefined) await this.resolvePathStyle(signal);
    return await this.#channel.call(
      'files.get',
      this.#channel.request('GET', this.#paths().file(id)),
      signal,
      this.#channel.json('files.get', parseServiceFile),
    );
  }

  /** The variable with its version (`etag`, from the ETag header) for a later conditional update. */
  async getVariable(id: string, signal?: AbortSignal): Promise<VersionedVariable> {
    if (this.#pathStyle.style === undefined) await this.resolvePathStyle(signal);
    return await this.#channel.call(
      'variables.get',
      this.#channel.request('GET', this.#paths().variable(id)),
      signal,
      this.#channel.versioned('variables.get'),
    );
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
    if (this.#pathStyle.style === undefined) await this.resolvePathStyle(options.signal);
    const body = serializeVariable(id, update);
    const request = this.#channel.request('PUT', this.#paths().variable(id), undefined, body);
    if (options.ifMatch !== undefined) request.headers['if-match'] = options.ifMatch;
    return await this.#channel.call(
      'variables.update',
      request,
      options.signal,
      this.#channel.versioned('variables.update'),
    );
  }

  /**
   * Every job definition, following pages like listTasks (one request a page, each through the budget). Each
   * record is kept as the service sent it: its fields are not documented (part 4.6).
   */
  async listJobs(options: { pageSize?: number; signal?: AbortSignal } = {}): Promise<Job[]> {
    const size = options.pageSize ?? MAX_PAGE_SIZE;
    checkPageSize(size);
    const jobs: Job[] = [];
    for (let page = 0; ; page++) {
      const envelope = await this.#channel.call(
        'jobs.list',
        this.#channel.request('GET', this.#paths().jobs(), { page: String(page), size: String(size) }),
        options.signal,
        this.#channel.json('jobs.list', (operation, value) => parseListEnvelope(operation, value, parseJob)),
      );
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
    return await this.#channel.call(
      'jobExecutions.list',
      this.#channel.request('GET', this.#paths().jobExecutions(), query),
      options.signal,
      this.#channel.json('jobExecutions.list', (operation, value) =>
        parseListEnvelope(operation, value, parseJobRun),
      ),
    );
  }

  async getJobExecution(id: string, signal?: AbortSignal): Promise<JobExecution> {
    if (this.#pathStyle.style === undefined) await this.resolvePathStyle(signal);
    return await this.#channel.call(
      'jobExecutions.get',
      this.#channel.request('GET', this.#paths().jobExecution(id)),
      signal,
      this.#channel.json('jobExecutions.get', parseJobExecution),
    );
  }

  /** Starts a job execution; the body's members are not documented by the service (part 4.5). */
  async createJobExecution(body: JsonObject, signal?: AbortSignal): Promise<JobExecution> {
    if (!isPlainObject(body)) {
      throw new TypeError('createJobExecution needs a plain JSON object as its body; nothing was sent');
    }
    if (this.#pathStyle.style === undefined) await this.resolvePathStyle(signal);
    return await this.#channel.call(
      'jobExecutions.create',
      this.#channel.request('POST', this.#paths().jobExecutions(), undefined, JSON.stringify(body)),
      signal,
      this.#channel.json('jobExecutions.create', parseJobExecution),
    );
  }

  /**
   * The spelling of the data-factory paths, found under `auto` by the first task list (underscore first, then
   * hyphen) and kept for the process: a first request of another kind sends a task list of size 1 before it.
   * Both spellings answering 404 reject with PathStyleError; any other failure leaves the spelling unknown, to
   * be tried again by the next request. Resolves what `auto` found, undefined under a fixed spelling.
   * Requests skip it once the spelling is known (no await: a poll reaches the gate in the same tick).
   */
  async resolvePathStyle(signal?: AbortSignal): Promise<PathStyleResolution | undefined> {
    await this.#pathStyle.resolve((paths) => this.#listPage(paths, 0, 1, signal), this.#channel.urlSetting);
    return this.#pathStyle.found;
  }

  /** What `auto` found (the spelling and the spellings tried); undefined before, and under a fixed spelling. */
  get pathStyleFound(): PathStyleResolution | undefined {
    return this.#pathStyle.found;
  }

  async #listPage(
    paths: ServicePaths,
    page: number,
    size: number,
    signal: AbortSignal | undefined,
  ): Promise<ListEnvelope<Task>> {
    return await this.#channel.call(
      'tasks.list',
      this.#channel.request('GET', paths.tasks(), { page: String(page), size: String(size) }),
      signal,
      this.#channel.json('tasks.list', (operation, value) => parseListEnvelope(operation, value, parseTask)),
    );
  }

  #paths(): ServicePaths {
    return this.#pathStyle.paths;
  }

  /** Closes the pooled connections once in-flight requests finish; later calls fail without sending. */
  async close(): Promise<void> {
    await this.#channel.close();
  }

  toString(): string {
    return `ServiceClient(${this.#channel.baseUrl})`;
  }

  toJSON(): { baseUrl: string; authMode: AuthMode; pathStyle: PathStyleSetting } {
    const { baseUrl, authMode } = this.#channel;
    return { baseUrl, authMode, pathStyle: this.#pathStyle.style ?? 'auto' };
  }

  [Symbol.for('nodejs.util.inspect.custom')](): string {
    return `ServiceClient ${JSON.stringify(this.toJSON())}`;
  }
}
