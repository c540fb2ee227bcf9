// The request machinery under ServiceClient: one request carries the key by the auth mode, waits on the budget
// gate, goes through the transport, and its answer is told to the gate, the service clock and the events.
import { systemClock, type Clock } from '../clock/clock.ts';
import { ServiceClock } from '../clock/service-clock.ts';
import type { EventSink } from '../events/worker-events.ts';
import { redactor } from '../secrets/redact.ts';
import { defaultUserAgent, httpTransport } from './client-options.ts';
import type { RequestGate, ResponseEvent, ServiceClientOptions, ServiceTransport } from './client-options.ts';
import { ResponseValidationError, ServiceClientError } from './errors.ts';
import { parseBaseUrl } from './outgoing.ts';
import { parseJsonBody, parseRetryAfter, toServiceError } from './response.ts';
import type { Answer } from './response.ts';
import { URL_SETTING } from './settings.ts';
import type { OutgoingRequest } from './transport.ts';
import { parseVariable } from './validate.ts';
import type { Operation, VersionedVariable } from './types.ts';
import type { ServiceError } from './errors.ts';

export type AuthMode = NonNullable<ServiceClientOptions['authMode']>;

/** A handler attempt, as its `ctx.service` requests name it in their `serviceCall` events. */
export interface AttemptRef {
  task: string;
  executionId: string;
  attempt: number;
}

/** How one request is sent once built; see ServiceClient.pollTask and reportExecution for who needs which. */
export interface CallOptions {
  /** What aborts the request once it has left the gate: by default the caller's signal; null for nothing. */
  sentSignal?: AbortSignal | null;
  /** Runs between the gate and the send; its rejection sends nothing. */
  beforeSend?: () => Promise<void>;
}

export class RequestChannel {
  readonly #apiKey: () => string;
  /** Removes the API key (raw or URL-encoded) from text that came from outside, e.g. an echoed URL. */
  readonly #redact: (text: string) => string;
  readonly authMode: AuthMode;
  /** The base URL without its trailing slashes: what the client names itself by (never with the key). */
  readonly baseUrl: string;
  /** The path prefix of the base URL, under which the data-factory paths are spelt. */
  readonly basePath: string;
  /** Scheme, host and port: what a request's path is relative to. */
  readonly #origin: string;
  readonly transport: ServiceTransport;
  readonly #gate: RequestGate | undefined;
  readonly #events: EventSink | undefined;
  /** The handler attempt whose `ctx.service` this channel carries: each request is also its `serviceCall`. */
  readonly #attempt: AttemptRef | undefined;
  readonly #userAgent: string;
  readonly urlSetting: string;
  readonly #clock: Pick<Clock, 'now' | 'monotonic'>;
  /** The service's clock, learnt from its answers' Date headers: where its createdAt instants fall locally. */
  readonly serviceClock: ServiceClock;
  /** A channel given another's transport shares it: the channel that made it alone closes it. */
  readonly #ownsTransport: boolean;
  #closed = false;

  constructor(options: ServiceClientOptions, sharedTransport?: ServiceTransport, attempt?: AttemptRef) {
    if (typeof options.apiKey !== 'string' || options.apiKey === '') {
      throw new TypeError('ServiceClient needs a non-empty apiKey');
    }
    this.urlSetting = options.urlSetting ?? URL_SETTING;
    this.#clock = options.clock ?? systemClock;
    this.serviceClock = new ServiceClock(this.#clock);
    const url = parseBaseUrl(options.baseUrl, this.urlSetting);
    const source = options.apiKeySource;
    const initial = options.apiKey;
    this.#apiKey = source ? () => source.current() : () => initial;
    this.#redact = source
      ? (text) => redactor([initial, ...(source.held?.() ?? [source.current()])])(text)
      : redactor([initial]);
    this.authMode = options.authMode ?? 'header';
    this.basePath = url.pathname;
    this.#origin = url.origin;
    this.baseUrl = `${url.origin}${url.pathname.replace(/\/+$/, '')}`;
    this.#gate = options.gate;
    this.#events = options.events;
    this.#attempt = attempt;
    this.#userAgent = options.userAgent ?? defaultUserAgent();
    this.#ownsTransport = sharedTransport === undefined;
    this.transport =
      sharedTransport ??
      options.transport ??
      httpTransport(options, url.origin, this.urlSetting, this.#redact);
  }

  /** A request for `path` with the key where the auth mode puts it; a string body is sent as JSON. */
  request(
    method: OutgoingRequest['method'],
    path: string,
    query: Record<string, string> = {},
    body?: string | FormData,
  ): OutgoingRequest {
    const headers: Record<string, string> = { accept: 'application/json', 'user-agent': this.#userAgent };
    if (this.authMode === 'header') headers['x-api-key'] = this.#apiKey();
    else if (this.authMode === 'bearer') headers.authorization = `Bearer ${this.#apiKey()}`;
    const params = new URLSearchParams(query);
    if (this.authMode === 'query') params.set('api_key', this.#apiKey());
    if (typeof body === 'string') headers['content-type'] = 'application/json';
    const search = params.toString();
    const request: OutgoingRequest = { method, path: search === '' ? path : `${path}?${search}`, headers };
    if (body !== undefined) request.body = body;
    return request;
  }

  /** Sends `request` once the gate lets it through and gives its answer to `interpret`. */
  async call<T>(
    operation: Operation,
    request: OutgoingRequest,
    signal: AbortSignal | undefined,
    interpret: (answer: Answer) => T,
    { sentSignal, beforeSend }: CallOptions = {},
  ): Promise<T> {
    if (this.#closed) {
      throw new ServiceClientError(
        `${operation} was not sent: the service client is closed; create a new one`,
      );
    }
    const permit = await this.#gate?.acquire(operation, signal);
    signal?.throwIfAborted();
    await beforeSend?.();
    // The gate counted the send when it let it through: it is told again now, and once the bytes are written.
    const departed = permit ? () => permit.departed() : undefined;
    departed?.();
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
      const answer = await this.transport.send(operation, request, whenSent, departed);
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

  /** Reads a success answer's JSON body with `parse`; any other status throws the service's error. */
  json<T>(operation: Operation, parse: (operation: Operation, value: unknown) => T): (answer: Answer) => T {
    return (answer) => {
      this.ensureSuccess(operation, answer);
      return parse(operation, parseJsonBody(operation, answer));
    };
  }

  /** Reads a variable and its version, from the ETag header, which the answer must carry. */
  versioned(operation: Operation): (answer: Answer) => VersionedVariable {
    return (answer) => {
      this.ensureSuccess(operation, answer);
      const variable = parseVariable(operation, parseJsonBody(operation, answer));
      const header = answer.headers.etag;
      const etag = Array.isArray(header) ? header[0] : header;
      if (etag === undefined || etag === '') {
        throw new ResponseValidationError(operation, '(headers)', `${answer.status} has no ETag header`);
      }
      return { variable, etag };
    };
  }

  ensureSuccess(operation: Operation, answer: Answer): void {
    if (answer.status < 200 || answer.status > 299) {
      throw this.serviceError(operation, answer);
    }
  }

  /** The answer as the service's error, the key removed from whatever of the request it echoes. */
  serviceError(operation: Operation, answer: Answer): ServiceError {
    return toServiceError(operation, answer, this.#redact);
  }

  /** Refuses later calls; closes the transport once in-flight requests finish, when this channel owns it. */
  async close(): Promise<void> {
    this.#closed = true;
    if (this.#ownsTransport) await this.transport.close();
  }

  /** Runs `interpret`; an answer of the wrong shape is blamed on the URL by the setting this client's user knows. */
  #interpret<T>(answer: Answer, interpret: (answer: Answer) => T): T {
    try {
      return interpret(answer);
    } catch (error) {
      if (error instanceof ResponseValidationError) throw error.naming(this.urlSetting);
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
    const events = this.#events;
    if (!events) return;
    try {
      events.emit('response', event);
    } catch {
      // A broken listener must not turn a successful request into a failure.
    }
    if (!this.#attempt) return;
    try {
      events.emit('serviceCall', { ...this.#attempt, ...event });
    } catch {
      // Nor a broken trace.
    }
  }
}
