// The emulator: a node:http server that answers like the service's custom-task surface, with
// per-key limits, a fault table and a request log, plus an admin surface to drive it from tests.
import { createHash, timingSafeEqual } from 'node:crypto';
import { createServer } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { systemClock } from '../clock/clock.ts';
import type { Clock } from '../clock/clock.ts';
import type { JobContext, JsonObject, Task, TaskDefinition, Variable } from '../api/types.ts';
import { adminIndex, answerAdmin } from './admin.ts';
import { EmulatorStateError, UnknownTaskError, VariableExistsError } from './errors.ts';
import { FaultTable } from './faults.ts';
import { ResponseTimeoutSettings } from './response-timeouts.ts';
import { RateLimiter, type KeyUsageFigures } from './limits.ts';
import { matchRoute } from './routes.ts';
import { isPlainObject } from '../schema/plain-object.ts';
import { serves, type ServedSpelling } from './path-spelling.ts';
import { MAX_UPLOAD_BYTES } from '../api/service-limits.ts';
import type { RouteMatch } from './routes.ts';
import { answerService } from './service.ts';
import { Store, type EmulatedFile } from './store.ts';
import type {
  EmulatedExecution,
  EmulatorOptions,
  FaultRule,
  NewVariable,
  RequestRecord,
  ResponseTimeout,
  VariableChanges,
} from './types.ts';
import { checkCrossSite, checkHost, checkJsonBody } from '../security/request-guard.ts';
import type { RequestRefusedError } from '../security/request-guard.ts';
import { errorAnswer, jsonAnswer, messageAnswer, readBody, writeAnswer } from './wire.ts';
import type { Answer, RequestBody } from './wire.ts';

const ERROR_CODES: Record<number, string> = {
  400: 'BAD_REQUEST',
  401: 'UNAUTHENTICATED',
  404: 'NOT_FOUND',
  412: 'PRECONDITION_FAILED',
  429: 'RATE_LIMIT',
};

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
  readonly #spelling: ServedSpelling;
  readonly #store: Store;
  readonly #limiter: RateLimiter;
  readonly #faults: FaultTable;
  readonly #responseTimeouts: ResponseTimeoutSettings;
  readonly #adminToken: string | undefined;
  readonly #onEnqueue: ((execution: EmulatedExecution) => void) | undefined;
  readonly #allowedHosts: readonly string[];
  #pages: EmulatorPages | undefined;
  #requests: RequestRecord[] = [];
  #server: Server | undefined;
  #url: string | undefined;
  /** Pending latency faults, released when the emulator closes so no handler outlives it. */
  #delays = new Set<() => void>();

  constructor(options: EmulatorOptions = {}) {
    this.#clock = options.clock ?? systemClock;
    this.#apiKeys = new Set(options.apiKeys ?? ['emulator-key']);
    this.#maxUploadBytes = options.maxUploadBytes ?? MAX_UPLOAD_BYTES;
    this.#spelling = options.pathStyle ?? 'both';
    this.#limiter = new RateLimiter(options.limits);
    this.#faults = new FaultTable(options.seed ?? 1);
    const settings = new ResponseTimeoutSettings(options.responseTimeouts);
    this.#responseTimeouts = settings;
    this.#store = new Store(this.#clock, (task) => this.#faults.claimTimeout(task.id) ?? settings.of(task));
    this.#adminToken = options.adminToken === '' ? undefined : options.adminToken;
    this.#onEnqueue = options.onEnqueue;
    this.#allowedHosts = (options.allowedHosts ?? []).map((name) => name.toLowerCase());
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
    for (const release of this.#delays) release();
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
    return structuredClone(this.#store.createJob(definition));
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
        ? this.#store.createVariable(changes)
        : this.#store.createVariableWithId(variable.id, changes);
    if (stored === undefined) throw new VariableExistsError(variable.id!);
    return { ...structuredClone(stored.variable), etag: `"${stored.version}"` };
  }

  /** The variable as stored now, with its ETag; undefined when no variable has this id. */
  variable(id: string): (Variable & { etag: string }) | undefined {
    const stored = this.#store.getVariable(id);
    return stored && { ...structuredClone(stored.variable), etag: `"${stored.version}"` };
  }

  variables(): (Variable & { etag: string })[] {
    return this.#store
      .storedVariables()
      .map((s) => ({ ...structuredClone(s.variable), etag: `"${s.version}"` }));
  }

  /** Applies `changes` over the variable as stored (a new version); undefined when no variable has this id. */
  updateVariable(id: string, changes: VariableChanges): (Variable & { etag: string }) | undefined {
    const stored = this.#store.updateVariable(id, changes);
    return stored && { ...structuredClone(stored.variable), etag: `"${stored.version}"` };
  }

  deleteVariable(id: string): boolean {
    return this.#store.deleteVariable(id);
  }

  /** File records, as uploads made them (the emulator keeps no content). */
  files(): EmulatedFile[] {
    return structuredClone(this.#store.files());
  }

  /** Adds a file record as an upload of `size` bytes would. */
  addFile(file: { name: string; size: number; contentType?: string }): EmulatedFile {
    const added = this.#store.addFile(file.name, file.size, file.contentType ?? 'application/octet-stream');
    return structuredClone(added);
  }

  updateFile(id: string, changes: { name?: string; contentType?: string }): EmulatedFile | undefined {
    const file = this.#store.updateFile(id, changes);
    return file && structuredClone(file);
  }

  deleteFile(id: string): boolean {
    return this.#store.deleteFile(id);
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
    return this.#adminAuthorized(authorization);
  }

  /** True when the admin routes (and pages mounted on this server) need the admin token. */
  get adminTokenRequired(): boolean {
    return this.#adminToken !== undefined;
  }

  requests(): RequestRecord[] {
    return structuredClone(this.#requests);
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
    this.#requests = [];
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
        const method = request.method ?? 'GET';
        const notJson = checkJsonBody(request.headers['content-type'], body.bytes.length);
        const answer = body.tooLarge
          ? messageAnswer(413, `The admin request body exceeds ${this.#maxUploadBytes} bytes.`)
          : notJson
            ? refusalAnswer(notJson)
            : method === 'GET' && /^\/__admin\/*$/.test(url.pathname)
              ? adminIndex(this.#adminToken !== undefined)
              : !this.#adminAuthorized(request.headers.authorization)
                ? errorAnswer(
                    401,
                    'UNAUTHENTICATED',
                    'This emulator requires its admin token: send Authorization: Bearer <admin token> ' +
                      '(df-worker dev prints it and writes it to its session file).',
                    this.#clock.now(),
                  )
                : answerAdmin(this, method, url.pathname, body.bytes, this.#clock.now());
        writeAnswer(response, answer);
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

  #adminAuthorized(header: string | undefined): boolean {
    if (this.#adminToken === undefined) return true;
    const given = /^Bearer\s+(\S+)\s*$/i.exec(header ?? '')?.[1] ?? '';
    const digest = (text: string) => createHash('sha256').update(text).digest();
    return timingSafeEqual(digest(given), digest(this.#adminToken));
  }

  async #serveService(request: IncomingMessage, response: ServerResponse, url: URL): Promise<void> {
    const call: ServiceCall = {
      method: request.method ?? 'GET',
      url,
      headers: request.headers,
      body: () => readBody(request, this.#maxUploadBytes),
    };
    await this.#service(call, (answer) => {
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
    await this.#service(call, (answer) => {
      delivered = answer;
      return answer !== undefined;
    });
    return delivered;
  }

  /** The emulator's clock now, as its answers' Date header would name it (ms since the epoch). */
  now(): number {
    return this.#clock.now();
  }

  /** Runs one service request; `deliver` sends the answer (undefined: drop the connection), false if it could not. */
  async #service(call: ServiceCall, deliver: (answer: Answer | undefined) => boolean): Promise<void> {
    const startedAt = performance.now();
    const { method, url } = call;
    const route = serves(this.#spelling, url.pathname) ? matchRoute(method, url.pathname) : undefined;
    const apiKey = apiKeyOf(call.headers, url);
    const record: RequestRecord = {
      at: this.#clock.now(),
      method,
      path: url.pathname,
      operation: route?.operation ?? 'unknown',
      status: 0,
      apiKeyValid: apiKey !== undefined && this.#apiKeys.has(apiKey),
      rateLimited: false,
    };
    this.#requests.push(record);
    const finish = (answer: Answer | undefined) => {
      if (deliver(answer)) record.status = answer!.status;
      if (record.status === 429) record.rateLimited = true;
      record.latencyMs = performance.now() - startedAt;
    };

    // Faults come first: they stand for what happens in front of, or instead of, the service.
    const fault = this.#faults.pick(record.operation, this.#taskIdOf(route));
    if (fault?.kind === 'drop') return finish(undefined);
    if (fault?.kind === 'status') return finish(this.#faultAnswer(fault));
    if (fault?.kind === 'rateLimit') {
      const headers: Record<string, string> =
        fault.retryAfterSeconds === undefined ? {} : { 'retry-after': String(fault.retryAfterSeconds) };
      return finish(
        errorAnswer(429, 'RATE_LIMIT', 'Rate limit exceeded (injected fault).', this.#clock.now(), headers),
      );
    }
    // The key and the rate limit are checked on arrival, as a gateway does: a slow answer (latency fault)
    // counts in the window the request arrived in.
    const refused = this.#admit(apiKey, record);
    if (refused) return finish(refused);
    if (fault?.kind === 'latency' && !(await this.#delay(fault.ms))) return finish(undefined);

    const answer = await this.#answerService(call, route, record);
    finish(fault?.kind === 'dropAfterApply' ? undefined : answer);
  }

  /** The 401 or 429 answer for a request the service does not let in; undefined when it may go on. */
  #admit(apiKey: string | undefined, record: RequestRecord): Answer | undefined {
    const nowMs = this.#clock.now();
    if (!record.apiKeyValid) {
      const message =
        'The API key is missing or not accepted; send a key the emulator was started with (default ' +
        "'emulator-key') in X-Api-Key, the api_key query parameter or Authorization: Bearer.";
      return errorAnswer(401, 'UNAUTHENTICATED', message, nowMs);
    }
    const decision = this.#limiter.take(apiKey!, nowMs);
    if (!decision.allowed) {
      const message = `Rate limit exceeded for this API key; retry after ${decision.retryAfterSeconds} s.`;
      return errorAnswer(429, 'RATE_LIMIT', message, nowMs, {
        'retry-after': String(decision.retryAfterSeconds),
      });
    }
    return undefined;
  }

  async #answerService(
    call: ServiceCall,
    route: RouteMatch | undefined,
    record: RequestRecord,
  ): Promise<Answer> {
    const nowMs = this.#clock.now();
    const { url } = call;
    const body = await call.body();
    if (body.tooLarge) {
      return messageAnswer(
        413,
        `The request body (${body.size} bytes) exceeds the ${this.#maxUploadBytes}-byte limit.`,
      );
    }
    if (!route) {
      return errorAnswer(
        404,
        'NOT_FOUND',
        `No route ${record.method} ${url.pathname}; check the method and path.`,
        nowMs,
      );
    }
    return answerService(this.#store, {
      operation: route.operation,
      id: route.id,
      query: url.searchParams,
      contentType: headerOf(call.headers, 'content-type'),
      ifMatch: headerOf(call.headers, 'if-match'),
      body: body.bytes,
      nowMs,
    });
  }

  #faultAnswer(fault: Extract<FaultRule, { kind: 'status' }>): Answer {
    if (fault.body === undefined) {
      const code = ERROR_CODES[fault.status] ?? 'INTERNAL';
      const answer = errorAnswer(
        fault.status,
        code,
        `Injected fault: HTTP ${fault.status}.`,
        this.#clock.now(),
      );
      return { ...answer, headers: { ...answer.headers, ...fault.headers } };
    }
    const contentType = fault.contentType ?? (looksLikeJson(fault.body) ? 'application/json' : 'text/plain');
    const headers: Record<string, string> =
      fault.body === '' && !fault.contentType ? {} : { 'content-type': contentType };
    return { status: fault.status, headers: { ...headers, ...fault.headers }, body: fault.body };
  }

  /** The task a request concerns, for fault rules restricted to one task. */
  #taskIdOf(route: RouteMatch | undefined): string | undefined {
    if (!route?.id) return undefined;
    if (route.operation.startsWith('tasks.')) return route.id;
    if (!route.operation.startsWith('executions.')) return undefined;
    return this.#store.getExecution(route.id)?.taskId;
  }

  /** Real-time delay; resolves false when the emulator closed meanwhile. */
  #delay(ms: number): Promise<boolean> {
    return new Promise<boolean>((resolve) => {
      const release = () => {
        clearTimeout(timer);
        this.#delays.delete(release);
        resolve(false);
      };
      const timer = setTimeout(() => {
        this.#delays.delete(release);
        resolve(true);
      }, ms);
      this.#delays.add(release);
    });
  }
}

function refusalAnswer(refused: RequestRefusedError): Answer {
  return jsonAnswer(refused.status, refused.toJSON(), { 'cache-control': 'no-store' });
}

/** Pages served under `path` by the emulator's own server (e.g. `/console`). */
export interface EmulatorPages {
  /** Without a trailing slash, e.g. `/console`. */
  path: string;
  serve(request: IncomingMessage, response: ServerResponse, url: URL): Promise<void>;
}

/** A service request, from a socket or in process. */
interface ServiceCall {
  method: string;
  url: URL;
  /** Lower-case names, as node:http gives them. */
  headers: Record<string, string | string[] | undefined>;
  body: () => Promise<RequestBody>;
}

function headerOf(headers: ServiceCall['headers'], name: string): string | undefined {
  const value = headers[name];
  return typeof value === 'string' ? value : undefined;
}

/** The key from X-Api-Key, then `Authorization: Bearer`, then the api_key query parameter. */
function apiKeyOf(headers: ServiceCall['headers'], url: URL): string | undefined {
  const header = headerOf(headers, 'x-api-key');
  if (header !== undefined && header !== '') return header;
  const bearer = /^Bearer\s+(\S+)\s*$/i.exec(headerOf(headers, 'authorization') ?? '');
  if (bearer) return bearer[1];
  return url.searchParams.get('api_key') ?? undefined;
}

function looksLikeJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}
