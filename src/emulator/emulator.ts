// The emulator: a node:http server that answers like the service's custom-task surface, with
// per-key limits, a fault table and a request log (the gateway, gateway.ts), plus an admin surface to drive it
// from tests. This file holds the state API tests drive and the HTTP front: host and cross-site checks, routing.
import { createHash, timingSafeEqual } from 'node:crypto';
import { createServer } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { systemClock } from '../clock/clock.ts';
import type { Clock } from '../clock/clock.ts';
import type { JobContext, JobExecution, JsonObject, Task, TaskDefinition, Variable } from '../api/types.ts';
import { answerAdminRequest } from './admin.ts';
import { EmulatorStateError, UnknownTaskError, VariableExistsError } from './errors.ts';
import { ArrivalWatch } from './arrival-watch.ts';
import { FaultTable } from './faults.ts';
import { ResponseTimeoutSettings } from './response-timeouts.ts';
import { RateLimiter, type KeyUsageFigures } from './limits.ts';
import { isPlainObject } from '../schema/plain-object.ts';
import { MAX_UPLOAD_BYTES } from '../api/service-limits.ts';
import { ServiceGateway, type ServiceCall } from './gateway.ts';
import type { EmulatedFile } from './file-store.ts';
import { Store } from './store.ts';
import type {
  EmulatedExecution,
  EmulatorOptions,
  EmulatorPages,
  FaultRule,
  NewVariable,
  RequestRecord,
  ResponseTimeout,
  VariableChanges,
} from './types.ts';
import { checkCrossSite, checkHost } from '../security/request-guard.ts';
import { versioned } from './variable-store.ts';
import { errorAnswer, readBody, refusalAnswer, writeAnswer } from './wire.ts';
import type { Answer } from './wire.ts';

/** A task's definition as the emulator takes it: its documented members, and any other field to keep. */
export type EmulatedTaskDefinition = Omit<Partial<TaskDefinition>, 'extraFields'> & {
  key: string;
  [field: string]: unknown;
};

/** The definition as the service receives it: a client-side `extraFields` spread beside the members. */
function flatDefinition(definition: EmulatedTaskDefinition | TaskDefinition): EmulatedTaskDefinition {
  const { extraFields, ...members } = definition as TaskDefinition;
  return { ...(isPlainObject(extraFields) ? extraFields : {}), ...members };
}

export class Emulator {
  readonly #clock: Clock;
  readonly #apiKeys: Set<string>;
  readonly #maxUploadBytes: number;
  readonly #store: Store;
  readonly #limiter: RateLimiter;
  readonly #faults: FaultTable;
  readonly #responseTimeouts: ResponseTimeoutSettings;
  readonly #adminToken: string | undefined;
  readonly #onEnqueue: ((execution: EmulatedExecution) => void) | undefined;
  readonly #allowedHosts: readonly string[];
  /** The request log, faults, key and limits in front of every service request. */
  readonly #gateway: ServiceGateway;
  #pages: EmulatorPages | undefined;
  #server: Server | undefined;
  readonly #watch: ArrivalWatch;
  #url: string | undefined;

  constructor(options: EmulatorOptions = {}) {
    this.#clock = options.clock ?? systemClock;
    this.#watch = new ArrivalWatch(this.#clock);
    this.#apiKeys = new Set(options.apiKeys ?? ['emulator-key']);
    this.#maxUploadBytes = options.maxUploadBytes ?? MAX_UPLOAD_BYTES;
    this.#limiter = new RateLimiter(options.limits);
    this.#faults = new FaultTable(options.seed ?? 1);
    const settings = new ResponseTimeoutSettings(options.responseTimeouts);
    this.#responseTimeouts = settings;
    this.#store = new Store(this.#clock, (task) => this.#faults.claimTimeout(task.id) ?? settings.of(task));
    this.#adminToken = options.adminToken === '' ? undefined : options.adminToken;
    this.#onEnqueue = options.onEnqueue;
    this.#allowedHosts = (options.allowedHosts ?? []).map((name) => name.toLowerCase());
    this.#gateway = new ServiceGateway({
      clock: this.#clock,
      apiKeys: this.#apiKeys,
      spelling: options.pathStyle ?? 'both',
      store: this.#store,
      limiter: this.#limiter,
      faults: this.#faults,
      maxUploadBytes: this.#maxUploadBytes,
    });
  }

  /**
   * Serves `pages` under `pages.path` on this server (the local web console), beside the service and the admin
   * surface; the pages decide which requests need the admin token (see adminAuthorized).
   */
  mount(pages: EmulatorPages): void {
    this.#pages = pages;
  }

  /** Starts serving; resolves the base URL, e.g. `http://127.0.0.1:PORT`. */
  async listen(port = 0, host = '127.0.0.1'): Promise<string> {
    if (this.#server) {
      throw new EmulatorStateError(`The emulator already listens on ${this.#url}; close it first.`);
    }
    const server = createServer((request, response) => void this.#serve(request, response));
    this.#server = server;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => {
        server.off('error', reject);
        resolve();
      });
    }).catch((error: unknown) => {
      this.#server = undefined;
      throw error;
    });
    this.#watch.start();
    const address = server.address() as AddressInfo;
    const shownHost = address.family === 'IPv6' ? `[${address.address}]` : address.address;
    this.#url = `http://${shownHost}:${address.port}`;
    return this.#url;
  }

  get url(): string {
    if (!this.#url) {
      throw new EmulatorStateError('The emulator is not listening; await listen() before reading url.');
    }
    return this.#url;
  }

  /** Stops serving and destroys every open connection, including those waiting on a latency fault. */
  async close(): Promise<void> {
    const server = this.#server;
    if (!server) return;
    this.#server = undefined;
    this.#url = undefined;
    this.#gateway.releaseDelays();
    this.#watch.stop();
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeAllConnections();
    await closed;
  }

  /** Fields beyond the definition's (`timeoutSeconds`...) are kept and answered as given. */
  createTask(definition: EmulatedTaskDefinition | TaskDefinition): Task {
    return structuredClone(this.#store.createTask(flatDefinition(definition)));
  }

  /** Replaces a task's definition, as PUT on the task does; throws UnknownTaskError when no task has this id. */
  updateTask(id: string, definition: EmulatedTaskDefinition | TaskDefinition): Task {
    const task = this.#store.updateTask(id, flatDefinition(definition));
    if (!task) throw new UnknownTaskError(id);
    return structuredClone(task);
  }

  /** Adds a job definition, answered by `GET /v1/data-factory/jobs` (kept as given, with an id). */
  createJob(definition: JsonObject): JsonObject {
    return structuredClone(this.#store.jobs.create(definition));
  }

  /**
   * A run of job `jobId` starts now (as its pipeline takes it), answered by `GET job-executions` as
   * `IN_PROGRESS`; `fields` replace or add members (a test leaves out `status` to see the degrade).
   */
  startJobRun(jobId: string, fields: JsonObject = {}): JobExecution {
    return structuredClone(this.#store.jobs.startRun(jobId, fields));
  }

  /** A run ended now; throws when no job execution has this id. */
  endJobRun(id: string, status = 'COMPLETED'): JobExecution {
    const record = this.#store.jobs.endRun(id, status);
    if (!record) throw new Error(`No job execution has id '${id}'.`);
    return structuredClone(record);
  }

  tasks(): Task[] {
    const { data } = this.#store.listTasks(0, Number.MAX_SAFE_INTEGER);
    return structuredClone(data);
  }

  /** Adds a pending execution; throws UnknownTaskError when no task has this id or key. */
  enqueueExecution(taskIdOrKey: string, input?: JsonObject, context?: JobContext): EmulatedExecution {
    const task = this.#store.findTask(taskIdOrKey);
    if (!task) throw new UnknownTaskError(taskIdOrKey);
    const execution = structuredClone(this.#store.enqueueExecution(task, input, context));
    this.#onEnqueue?.(structuredClone(execution));
    return execution;
  }

  executions(): EmulatedExecution[] {
    return structuredClone(this.#store.executions());
  }

  execution(id: string): EmulatedExecution | undefined {
    const execution = this.#store.getExecution(id);
    return execution && structuredClone(execution);
  }

  /**
   * Adds a variable at version 1 (ETag `"1"`); every accepted update raises the version by one. Its id is `id`
   * when given (VariableExistsError when a variable has it), else the next `variable-N`.
   */
  createVariable(variable: NewVariable): Variable & { etag: string } {
    const changes: VariableChanges = {
      key: variable.key,
      name: variable.name ?? variable.key,
      value: variable.value,
      secret: variable.secret ?? false,
      status: 'ACTIVE',
    };
    const stored =
      variable.id === undefined
        ? this.#store.variables.create(changes)
        : this.#store.variables.createWithId(variable.id, changes);
    if (stored === undefined) throw new VariableExistsError(variable.id!);
    return versioned(stored);
  }

  /** The variable as stored now, with its ETag; undefined when no variable has this id. */
  variable(id: string): (Variable & { etag: string }) | undefined {
    const stored = this.#store.variables.get(id);
    return stored && versioned(stored);
  }

  variables(): (Variable & { etag: string })[] {
    return this.#store.variables.stored().map(versioned);
  }

  /** Applies `changes` over the variable as stored (a new version); undefined when no variable has this id. */
  updateVariable(id: string, changes: VariableChanges): (Variable & { etag: string }) | undefined {
    const stored = this.#store.variables.update(id, changes);
    return stored && versioned(stored);
  }

  deleteVariable(id: string): boolean {
    return this.#store.variables.delete(id);
  }

  /** File records, as uploads made them (the emulator keeps no content). */
  files(): EmulatedFile[] {
    return structuredClone(this.#store.files.list());
  }

  /** Adds a file record as an upload of `size` bytes would. */
  addFile(file: { name: string; size: number; contentType?: string }): EmulatedFile {
    const added = this.#store.files.add(file.name, file.size, file.contentType ?? 'application/octet-stream');
    return structuredClone(added);
  }

  updateFile(id: string, changes: { name?: string; contentType?: string }): EmulatedFile | undefined {
    const file = this.#store.files.update(id, changes);
    return file && structuredClone(file);
  }

  deleteFile(id: string): boolean {
    return this.#store.files.delete(id);
  }

  /** Each API key's use of the limits now: the service's side of the key's budget. */
  usage(): KeyUsageFigures[] {
    return this.#limiter.usage(this.#clock.now());
  }

  /** Replaces the accepted API keys (a key revoked, another issued): requests with any other key get 401. */
  setApiKeys(keys: readonly string[]): void {
    this.#apiKeys.clear();
    for (const key of keys) this.#apiKeys.add(key);
  }

  /** Whether `authorization` (a request's header) carries the admin token, or none is needed. */
  adminAuthorized(authorization: string | undefined): boolean {
    if (this.#adminToken === undefined) return true;
    const given = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? '')?.[1] ?? '';
    const digest = (text: string) => createHash('sha256').update(text).digest();
    return timingSafeEqual(digest(given), digest(this.#adminToken));
  }

  /** True when the admin routes (and pages mounted on this server) need the admin token. */
  get adminTokenRequired(): boolean {
    return this.#adminToken !== undefined;
  }

  requests(): RequestRecord[] {
    return structuredClone(this.#gateway.requests);
  }

  /** Replaces the fault table (and reseeds its PRNG); throws InvalidFaultRuleError on a malformed rule. */
  setFaults(faults: FaultRule[]): void {
    this.#faults.replace(faults);
  }

  clearFaults(): void {
    this.#faults.clear();
  }

  /** Sets (or with undefined removes) the response timeout of claims made from now on of a task, by id or key. */
  setResponseTimeout(taskIdOrKey: string, timeout: ResponseTimeout | undefined): void {
    this.#responseTimeouts.set(taskIdOrKey, timeout);
  }

  /** Back to a fresh emulator: no tasks, executions, log, faults or consumed budget. */
  reset(): void {
    this.#store.reset();
    this.#gateway.requests = [];
    this.#faults.clear();
    this.#limiter.reset();
  }

  async #serve(request: IncomingMessage, response: ServerResponse): Promise<void> {
    try {
      // The service's clock is this emulator's (its createdAt instants and its windows), not the machine's.
      response.setHeader('date', new Date(this.#clock.now()).toUTCString());
      // Prefixing (not resolving against a base) keeps a path such as `//x` a path, never a host.
      const target = request.url ?? '/';
      const url = new URL(target.startsWith('/') ? `http://emulator.invalid${target}` : target);
      const pages = this.#pages;
      // No web page may drive the emulator: not by its own name resolved here, nor from another site (a poll
      // is a GET that claims, so reads are refused too).
      const refused =
        checkHost(request.headers.host, { ipLiterals: true, names: this.#allowedHosts }) ??
        checkCrossSite(request.method ?? 'GET', request.headers, { allMethods: true });
      if (refused) {
        request.resume();
        writeAnswer(response, refusalAnswer(refused));
      } else if (pages && (url.pathname === pages.path || url.pathname.startsWith(`${pages.path}/`))) {
        await pages.serve(request, response, url);
      } else if (url.pathname === '/__admin' || url.pathname.startsWith('/__admin/')) {
        const body = await readBody(request, this.#maxUploadBytes);
        const { method = 'GET', headers } = request;
        writeAnswer(
          response,
          answerAdminRequest(this, method, url.pathname, headers, body, this.#maxUploadBytes),
        );
      } else {
        await this.#serveService(request, response, url);
      }
    } catch (error) {
      // A client that vanished mid-body, or a bug: never let it crash the process hosting the emulator.
      const reason = error instanceof Error ? error.message : String(error);
      const message = `The emulator failed to handle the request: ${reason}`;
      writeAnswer(response, errorAnswer(500, 'INTERNAL', message, this.#clock.now()));
    }
  }

  async #serveService(request: IncomingMessage, response: ServerResponse, url: URL): Promise<void> {
    const call: ServiceCall = {
      method: request.method ?? 'GET',
      url,
      headers: request.headers,
      body: () => readBody(request, this.#maxUploadBytes),
      earliestAt: this.#watch.earliest(this.#clock.now()),
    };
    await this.#gateway.serve(call, (answer) => {
      if (answer && writeAnswer(response, answer)) return true;
      request.socket.destroy();
      return false;
    });
  }

  /**
   * Answers a service request without a socket, exactly as over HTTP (key, limits, faults, the request log):
   * for the month replay, which runs the daemon in virtual time. Undefined: the connection was dropped.
   */
  async answer(request: {
    method: string;
    /** Path with its query string. */
    path: string;
    headers: Record<string, string>;
    body?: string;
  }): Promise<Answer | undefined> {
    const bytes = Buffer.from(request.body ?? '', 'utf8');
    const tooLarge = bytes.length > this.#maxUploadBytes;
    const call: ServiceCall = {
      method: request.method,
      url: new URL(`http://emulator.invalid${request.path.startsWith('/') ? '' : '/'}${request.path}`),
      headers: request.headers,
      body: () =>
        Promise.resolve({ bytes: tooLarge ? Buffer.alloc(0) : bytes, size: bytes.length, tooLarge }),
    };
    let delivered: Answer | undefined;
    await this.#gateway.serve(call, (answer) => {
      delivered = answer;
      return answer !== undefined;
    });
    return delivered;
  }

  /** The emulator's clock now, as its answers' Date header would name it (ms since the epoch). */
  now(): number {
    return this.#clock.now();
  }
}
