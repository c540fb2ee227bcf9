// ServiceClient: the only code that speaks to the service. Each method is one request (listTasks: one per
// page), awaited through the budget gate, validated at the boundary, reported once to the metrics hook.
import { systemClock, type Clock } from '../clock/clock.ts';
import { ServiceClock } from '../clock/service-clock.ts';
import { redactor } from '../secrets/redact.ts';
import { defaultUserAgent, httpTransport } from './client-options.ts';
import type {
  ExecutionReport,
  FileUpload,
  RequestGate,
  ResponseEvent,
  ServiceClientOptions,
  ServiceTransport,
  VariableUpdateOptions,
} from './client-options.ts';
import { ResponseValidationError, ServiceClientError } from './errors.ts';
import { checkPageSize, MAX_PAGE_SIZE, parseBaseUrl, serializeReport, toBlob } from './outgoing.ts';
import type { ServicePaths } from './paths.ts';
import { checkUploadSize } from './file-limits.ts';
import { PathStyleHolder, type PathStyleResolution, type PathStyleSetting } from './path-style.ts';
import { parseJsonBody, parseRetryAfter, toServiceError } from './response.ts';
import type { Answer } from './response.ts';
import { URL_SETTING } from './settings.ts';
import type { OutgoingRequest } from './transport.ts';
import { isPlainObject } from '../schema/plain-object.ts';
import {
  parseJob,
  parseJobExecution,
  parseListEnvelope,
  parseServiceFile,
  parseVariable,
  parseTask,
  parseTaskExecution,
} from './validate.ts';
import type {
  Job,
  JobExecution,
  JsonObject,
  ListEnvelope,
  Operation,
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

type AuthMode = NonNullable<ServiceClientOptions['authMode']>;

export class ServiceClient {
  readonly #apiKey: () => string;
  /** Removes the API key (raw or URL-encoded) from text that came from outside, e.g. an echoed URL. */
  readonly #redact: (text: string) => string;
  readonly #authMode: AuthMode;
  /** The spelling of the paths, found by a probe before the first request under `auto`; shared with siblings. */
  readonly #pathStyle: PathStyleHolder;
  readonly #baseUrl: string;
  /** Scheme, host and port: what a request's path is relative to. */
  readonly #origin: string;
  readonly #transport: ServiceTransport;
  readonly #gate: RequestGate | undefined;
  readonly #onResponse: ((event: ResponseEvent) => void) | undefined;
  readonly #userAgent: string;
  readonly #options: ServiceClientOptions;
  readonly #urlSetting: string;
  readonly #clock: Pick<Clock, 'now' | 'monotonic'>;
  /** The service's clock, learnt from its answers' Date headers: where its createdAt instants fall locally. */
  readonly serviceClock: ServiceClock;
  /** A sibling made by withGate() shares the transport of the client that made it, which alone closes it. */
  readonly #ownsTransport: boolean;
  #closed = false;

  constructor(
    options: ServiceClientOptions,
    shared?: { transport: ServiceTransport; pathStyle: PathStyleHolder },
  ) {
    if (typeof options.apiKey !== 'string' || options.apiKey === '') {
      throw new TypeError('ServiceClient needs a non-empty apiKey');
    }
    this.#urlSetting = options.urlSetting ?? URL_SETTING;
    this.#clock = options.clock ?? systemClock;
    this.serviceClock = new ServiceClock(this.#clock);
    const url = parseBaseUrl(options.baseUrl, this.#urlSetting);
    const source = options.apiKeySource;
    const initial = options.apiKey;
    this.#apiKey = source ? () => source.current() : () => initial;
    this.#redact = source
      ? (text) => redactor([initial, ...(source.held?.() ?? [source.current()])])(text)
      : redactor([initial]);
    this.#authMode = options.authMode ?? 'header';
    this.#pathStyle = shared?.pathStyle ?? new PathStyleHolder(options.pathStyle ?? 'hyphen', url.pathname);
    this.#origin = url.origin;
    this.#baseUrl = `${url.origin}${url.pathname.replace(/\/+$/, '')}`;
    this.#gate = options.gate;
    this.#onResponse = options.onResponse;
    this.#userAgent = options.userAgent ?? defaultUserAgent();
    this.#ownsTransport = shared === undefined;
    this.#options = options;
    this.#transport =
      shared?.transport ??
      options.transport ??
      httpTransport(options, url.origin, this.#urlSetting, this.#redact);
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
        this.#urlSetting,
      );
      if (probed !== undefined) return probed;
    }
    return await this.#listPage(this.#paths(), page, size, signal);
  }

  async getTask(id: string, signal?: AbortSignal): Promise<Task> {
    if (this.#pathStyle.style === undefined) await this.resolvePathStyle(signal);
    return await this.#call(
      'tasks.get',
      this.#request('GET', this.#paths().task(id)),
      signal,
      this.#json('tasks.get', parseTask),
    );
  }

  async createTask(definition: TaskDefinition, signal?: AbortSignal): Promise<Task> {
    if (this.#pathStyle.style === undefined) await this.resolvePathStyle(signal);
    return await this.#call(
      'tasks.create',
      this.#request('POST', this.#paths().tasks(), undefined, taskBody(definition)),
      signal,
      this.#json('tasks.create', parseTask),
    );
  }

  /**
   * Replaces the task's definition. The service resets what a PUT lacks, so pass the task's `extraFields` (a
   * Task read from the service may be passed whole): they go back unchanged beside the definition.
   */
  async updateTask(id: string, definition: TaskDefinition, signal?: AbortSignal): Promise<Task> {
    if (this.#pathStyle.style === undefined) await this.resolvePathStyle(signal);
    return await this.#call(
      'tasks.update',
      this.#request('PUT', this.#paths().task(id), undefined, taskBody(definition, id)),
      signal,
      this.#json('tasks.update', parseTask),
    );
  }

  async deleteTask(id: string, signal?: AbortSignal): Promise<void> {
    if (this.#pathStyle.style === undefined) await this.resolvePathStyle(signal);
    // The service answers a bare success status (part 4.1); whatever body comes with it is ignored.
    return await this.#call(
      'tasks.delete',
      this.#request('DELETE', this.#paths().task(id)),
      signal,
      (answer) => {
        this.#ensureSuccess('tasks.delete', answer);
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
    return await this.#call(
      'tasks.poll',
      this.#request('GET', this.#paths().poll(taskId)),
      signal,
      (answer) => {
        if (answer.status === 404) {
          const error = toServiceError('tasks.poll', answer, this.#redact);
          // Only the service's NOT_FOUND envelope says "nothing pending". Any other 404 (an HTML page, an empty
          // body, a `{message}` of a route the server does not have) is a wrong URL, spelling or proxy: reading
          // it as null would poll an empty queue forever without anyone noticing.
          if (error.code === 'NOT_FOUND') return null;
          throw error;
        }
        this.#ensureSuccess('tasks.poll', answer);
        return parseTaskExecution('tasks.poll', parseJsonBody('tasks.poll', answer));
      },
      { sentSignal: cut ?? null },
    );
  }

  async getExecution(id: string, signal?: AbortSignal): Promise<TaskExecution> {
    if (this.#pathStyle.style === undefined) await this.resolvePathStyle(signal);
    return await this.#call(
      'executions.get',
      this.#request('GET', this.#paths().execution(id)),
      signal,
      this.#json('executions.get', parseTaskExecution),
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
    return await this.#call(
      'executions.report',
      this.#request('PATCH', this.#paths().execution(id), undefined, body),
      signal,
      this.#json('executions.report', parseTaskExecution),
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
      { transport: this.#transport, pathStyle: this.#pathStyle },
    );
  }

  /**
   * A client for the same service, key and gate that also tells `onResponse` of each of its requests (a handler
   * attempt's `ctx.service` calls, for its trace). It shares this client's connections, as withGate's does.
   */
  observed(onResponse: (event: ResponseEvent) => void): ServiceClient {
    const own = this.#options.onResponse;
    return new ServiceClient(
      {
        ...this.#options,
        onResponse: (event) => {
          try {
            own?.(event);
          } finally {
            onResponse(event);
          }
        },
      },
      { transport: this.#transport, pathStyle: this.#pathStyle },
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
    if (this.#pathStyle.style === undefined) await this.resolvePathStyle(signal);
    const form = new FormData();
    form.append('file', blob, file.name);
    return await this.#call(
      'files.upload',
      this.#request('POST', this.#paths().files(), undefined, form),
      signal,
      this.#json('files.upload', parseServiceFile),
    );
  }

  /** The v2 file record with this id; 404 when there is none. */
  async getFile(id: string, signal?: AbortSignal): Promise<ServiceFile> {
    if (this.#pathStyle.style === undefined) await this.resolvePathStyle(signal);
    return await this.#call(
      'files.get',
      this.#request('GET', this.#paths().file(id)),
      signal,
      this.#json('files.get', parseServiceFile),
    );
  }

  /** The variable with its version (`etag`, from the ETag header) for a later conditional update. */
  async getVariable(id: string, signal?: AbortSignal): Promise<VersionedVariable> {
    if (this.#pathStyle.style === undefined) await this.resolvePathStyle(signal);
    return await this.#call(
      'variables.get',
      this.#request('GET', this.#paths().variable(id)),
      signal,
      this.#versioned('variables.get'),
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
    const { key, name, value, secret, status = 'ACTIVE' } = update;
    if (this.#pathStyle.style === undefined) await this.resolvePathStyle(options.signal);
    const request = this.#request(
      'PUT',
      this.#paths().variable(id),
      undefined,
      JSON.stringify({ id, key, name, value, secret, status }),
    );
    if (options.ifMatch !== undefined) request.headers['if-match'] = options.ifMatch;
    return await this.#call('variables.update', request, options.signal, this.#versioned('variables.update'));
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
      const envelope = await this.#call(
        'jobs.list',
        this.#request('GET', this.#paths().jobs(), { page: String(page), size: String(size) }),
        options.signal,
        this.#json('jobs.list', (operation, value) => parseListEnvelope(operation, value, parseJob)),
      );
      jobs.push(...envelope.data);
      if (envelope.data.length === 0 || jobs.length >= envelope.totalElements) return jobs;
    }
  }

  async getJobExecution(id: string, signal?: AbortSignal): Promise<JobExecution> {
    if (this.#pathStyle.style === undefined) await this.resolvePathStyle(signal);
    return await this.#call(
      'jobExecutions.get',
      this.#request('GET', this.#paths().jobExecution(id)),
      signal,
      this.#json('jobExecutions.get', parseJobExecution),
    );
  }

  /** Starts a job execution; the body's members are not documented by the service (part 4.5). */
  async createJobExecution(body: JsonObject, signal?: AbortSignal): Promise<JobExecution> {
    if (!isPlainObject(body)) {
      throw new TypeError('createJobExecution needs a plain JSON object as its body; nothing was sent');
    }
    if (this.#pathStyle.style === undefined) await this.resolvePathStyle(signal);
    return await this.#call(
      'jobExecutions.create',
      this.#request('POST', this.#paths().jobExecutions(), undefined, JSON.stringify(body)),
      signal,
      this.#json('jobExecutions.create', parseJobExecution),
    );
  }

  /** Closes the pooled connections once in-flight requests finish; later calls fail without sending. */
  /**
   * The spelling of the data-factory paths, found under `auto` by the first task list (underscore first, then
   * hyphen) and kept for the process: a first request of another kind sends a task list of size 1 before it.
   * Both spellings answering 404 reject with PathStyleError; any other failure leaves the spelling unknown, to
   * be tried again by the next request. Resolves what `auto` found, undefined under a fixed spelling.
   * Requests skip it once the spelling is known (no await: a poll reaches the gate in the same tick).
   */
  async resolvePathStyle(signal?: AbortSignal): Promise<PathStyleResolution | undefined> {
    await this.#pathStyle.resolve((paths) => this.#listPage(paths, 0, 1, signal), this.#urlSetting);
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
    return await this.#call(
      'tasks.list',
      this.#request('GET', paths.tasks(), { page: String(page), size: String(size) }),
      signal,
      this.#json('tasks.list', (operation, value) => parseListEnvelope(operation, value, parseTask)),
    );
  }

  #paths(): ServicePaths {
    return this.#pathStyle.paths;
  }

  async close(): Promise<void> {
    this.#closed = true;
    if (this.#ownsTransport) await this.#transport.close();
  }

  toString(): string {
    return `ServiceClient(${this.#baseUrl})`;
  }

  toJSON(): { baseUrl: string; authMode: AuthMode; pathStyle: PathStyleSetting } {
    return { baseUrl: this.#baseUrl, authMode: this.#authMode, pathStyle: this.#pathStyle.style ?? 'auto' };
  }

  [Symbol.for('nodejs.util.inspect.custom')](): string {
    return `ServiceClient ${JSON.stringify(this.toJSON())}`;
  }

  async #call<T>(
    operation: Operation,
    request: OutgoingRequest,
    signal: AbortSignal | undefined,
    interpret: (answer: Answer) => T,
    // What aborts the request once it has left the gate: by default the caller's signal; null for nothing.
    // `beforeSend` runs between the gate and the send.
    { sentSignal, beforeSend }: { sentSignal?: AbortSignal | null; beforeSend?: () => Promise<void> } = {},
  ): Promise<T> {
    if (this.#closed) {
      throw new ServiceClientError(
        `${operation} was not sent: the service client is closed; create a new one`,
      );
    }
    await this.#gate?.acquire(operation, signal);
    signal?.throwIfAborted();
    await beforeSend?.();
    const started = performance.now();
    const sent = {
      operation,
      method: request.method,
      url: this.#origin + request.path.split('?', 1)[0]!,
      startedAt: performance.timeOrigin + started,
    };
    let status = 0;
    try {
      const whenSent = sentSignal === undefined ? signal : (sentSignal ?? undefined);
      const answer = await this.#transport.send(operation, request, whenSent);
      status = answer.status;
      this.#observe(operation, answer);
      const value = this.#interpret(answer, interpret);
      this.#emit({ ...sent, status, durationMs: performance.now() - started });
      return value;
    } catch (error) {
      const event: ResponseEvent = { ...sent, status, durationMs: performance.now() - started };
      if (error instanceof ServiceClientError) event.error = error;
      this.#emit(event);
      throw error;
    }
  }

  /** Runs `interpret`; an answer of the wrong shape is blamed on the URL by the setting this client's user knows. */
  #interpret<T>(answer: Answer, interpret: (answer: Answer) => T): T {
    try {
      return interpret(answer);
    } catch (error) {
      if (error instanceof ResponseValidationError) throw error.naming(this.#urlSetting);
      throw error;
    }
  }

  #observe(operation: Operation, answer: Answer): void {
    this.serviceClock.observe(answer.headers.date);
    try {
      this.#gate?.observe?.({
        operation,
        status: answer.status,
        // A Retry-After date is on the service's clock: read it against the answer's own Date when it has one.
        retryAfterMs: parseRetryAfter(answer.headers['retry-after'], this.#answeredAt(answer)),
      });
    } catch {
      // The answer must reach the caller whatever the gate does with it: a poll's answer claimed an execution.
    }
  }

  /** The instant the service made `answer`, on its clock (its Date header), else the local wall clock now. */
  #answeredAt(answer: Answer): number {
    const date = answer.headers.date;
    const at = Date.parse((Array.isArray(date) ? date[0] : date) ?? '');
    return Number.isNaN(at) ? this.#clock.now() : at;
  }

  #emit(event: ResponseEvent): void {
    try {
      this.#onResponse?.(event);
    } catch {
      // A broken metrics hook must not turn a successful request into a failure.
    }
  }

  #json<T>(operation: Operation, parse: (operation: Operation, value: unknown) => T): (answer: Answer) => T {
    return (answer) => {
      this.#ensureSuccess(operation, answer);
      return parse(operation, parseJsonBody(operation, answer));
    };
  }

  #versioned(operation: Operation): (answer: Answer) => VersionedVariable {
    return (answer) => {
      this.#ensureSuccess(operation, answer);
      const variable = parseVariable(operation, parseJsonBody(operation, answer));
      const header = answer.headers.etag;
      const etag = Array.isArray(header) ? header[0] : header;
      if (etag === undefined || etag === '') {
        throw new ResponseValidationError(operation, '(headers)', `${answer.status} has no ETag header`);
      }
      return { variable, etag };
    };
  }

  #ensureSuccess(operation: Operation, answer: Answer): void {
    if (answer.status < 200 || answer.status > 299) {
      throw toServiceError(operation, answer, this.#redact);
    }
  }

  #request(
    method: OutgoingRequest['method'],
    path: string,
    query: Record<string, string> = {},
    body?: string | FormData,
  ): OutgoingRequest {
    const headers: Record<string, string> = { accept: 'application/json', 'user-agent': this.#userAgent };
    if (this.#authMode === 'header') headers['x-api-key'] = this.#apiKey();
    else if (this.#authMode === 'bearer') headers.authorization = `Bearer ${this.#apiKey()}`;
    const params = new URLSearchParams(query);
    if (this.#authMode === 'query') params.set('api_key', this.#apiKey());
    if (typeof body === 'string') headers['content-type'] = 'application/json';
    const search = params.toString();
    const request: OutgoingRequest = { method, path: search === '' ? path : `${path}?${search}`, headers };
    if (body !== undefined) request.body = body;
    return request;
  }
}

/** A task's create or update body: its extra fields as read, then the definition's members (which win). */
function taskBody(definition: TaskDefinition, id?: string): string {
  const { key, description, retryCount, inputKeys, outputKeys, extraFields } = definition;
  const members = { key, description, retryCount, inputKeys, outputKeys };
  return JSON.stringify(
    id === undefined ? { ...extraFields, ...members } : { ...extraFields, ...members, id },
  );
}
