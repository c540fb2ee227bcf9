// What every ServiceClient request stands on: the request channel (gate, transport, answers observed), the
// spelling of the data-factory paths (probed under `auto`), and the one recipe each operation follows (spelling
// first, then the request through the gate, its answer read). client.ts then holds only which requests the
// service has, each in a few lines.
import type { ServiceClock } from '../clock/service-clock.ts';
import type { Operation } from '../events/operations.ts';
import type { RequestGate, ServiceClientOptions, ServiceTransport } from './client-options.ts';
import type { ServicePaths } from './paths.ts';
import { PathStyleHolder, type PathStyleResolution, type PathStyleSetting } from './path-style.ts';
import { RequestChannel, type AttemptRef, type AuthMode, type CallOptions } from './request-channel.ts';
import type { Answer } from './response.ts';
import type { OutgoingRequest } from './transport.ts';
import type { ListEnvelope, Task } from './types.ts';
import { parseListEnvelope, parseTask } from './validate.ts';

/** What a request carries besides its method and path (see RequestClient.send). */
/** What a sibling shares with the client that made it. */
interface SharedParts {
  transport: ServiceTransport;
  pathStyle: PathStyleHolder;
  attempt?: AttemptRef;
}

export interface RequestParts {
  query?: Record<string, string>;
  body?: string | FormData;
  headers?: Record<string, string>;
  call?: CallOptions;
}

export abstract class RequestClient {
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
  constructor(options: ServiceClientOptions, shared?: SharedParts) {
    this.#channel = new RequestChannel(options, shared?.transport, shared?.attempt);
    this.serviceClock = this.#channel.serviceClock;
    this.#pathStyle =
      shared?.pathStyle ?? new PathStyleHolder(options.pathStyle ?? 'hyphen', this.#channel.basePath);
    this.#options = options;
  }

  /** The channel requests go through (a getter: the options it holds, the key among them, stay private). */
  protected get channel(): RequestChannel {
    return this.#channel;
  }

  protected get pathStyle(): PathStyleHolder {
    return this.#pathStyle;
  }

  /**
   * A client for the same service and key whose requests wait on `gate` instead: the daemon's handlers get one
   * whose requests rank below reports in the shared budget. It shares this client's connections; closing it
   * refuses its later calls but leaves the connections to this client.
   */
  withGate(gate: RequestGate): this {
    return this.#sibling({ ...this.#options, gate });
  }

  /**
   * The client of one handler attempt's `ctx.service`: each of its requests is also told as that attempt's
   * `serviceCall` (for its trace), after its `response`. It shares this client's connections, as withGate's
   * does. While nobody listens to `serviceCall` (no traces) it is this client itself: no cost.
   */
  forAttempt(attempt: AttemptRef): this {
    const events = this.#options.events;
    if (!events || events.listenerCount('serviceCall') === 0) return this;
    return this.#sibling(this.#options, { ...attempt });
  }

  /** A client of this one's class on its connections and spelling. */
  #sibling(options: ServiceClientOptions, attempt?: AttemptRef): this {
    const Client = this.constructor as new (options: ServiceClientOptions, shared: SharedParts) => this;
    const shared = { transport: this.#channel.transport, pathStyle: this.#pathStyle };
    return new Client(options, attempt ? { ...shared, attempt } : shared);
  }

  /**
   * The spelling of the data-factory paths, found under `auto` by the first task list (underscore first, then
   * hyphen) and kept for the process: a first request of another kind sends a task list of size 1 before it.
   * Both spellings answering 404 reject with PathStyleError; any other failure leaves the spelling unknown, to
   * be tried again by the next request. Resolves what `auto` found, undefined under a fixed spelling.
   * Requests skip it once the spelling is known (no await: a poll reaches the gate in the same tick).
   */
  async resolvePathStyle(signal?: AbortSignal): Promise<PathStyleResolution | undefined> {
    await this.pathStyle.resolve((paths) => this.listPage(paths, 0, 1, signal), this.channel.urlSetting);
    return this.pathStyle.found;
  }

  /** What `auto` found (the spelling and the spellings tried); undefined before, and under a fixed spelling. */
  get pathStyleFound(): PathStyleResolution | undefined {
    return this.pathStyle.found;
  }

  protected async listPage(
    paths: ServicePaths,
    page: number,
    size: number,
    signal: AbortSignal | undefined,
  ): Promise<ListEnvelope<Task>> {
    return await this.channel.call(
      'tasks.list',
      this.channel.request('GET', paths.tasks(), { page: String(page), size: String(size) }),
      signal,
      this.channel.json('tasks.list', (operation, value) => parseListEnvelope(operation, value, parseTask)),
    );
  }

  /**
   * One request whose answer is a JSON record: under `auto` the spelling is found first; once known, the request
   * reaches the gate in the same tick (no await before it).
   */
  protected async record<T>(
    operation: Operation,
    method: OutgoingRequest['method'],
    path: (paths: ServicePaths) => string,
    parse: (operation: Operation, value: unknown) => T,
    signal: AbortSignal | undefined,
    parts?: RequestParts,
  ): Promise<T> {
    return await this.send(operation, method, path, signal, this.channel.json(operation, parse), parts);
  }

  /** One request, its answer read by `interpret` (see record). */
  protected async send<T>(
    operation: Operation,
    method: OutgoingRequest['method'],
    path: (paths: ServicePaths) => string,
    signal: AbortSignal | undefined,
    interpret: (answer: Answer) => T,
    { query, body, headers, call }: RequestParts = {},
  ): Promise<T> {
    if (this.pathStyle.style === undefined) await this.resolvePathStyle(signal);
    const request = this.channel.request(method, path(this.paths()), query, body);
    if (headers) Object.assign(request.headers, headers);
    return await this.channel.call(operation, request, signal, interpret, call);
  }

  protected paths(): ServicePaths {
    return this.pathStyle.paths;
  }

  /** Closes the pooled connections once in-flight requests finish; later calls fail without sending. */
  async close(): Promise<void> {
    await this.channel.close();
  }

  toString(): string {
    return `ServiceClient(${this.channel.baseUrl})`;
  }

  toJSON(): { baseUrl: string; authMode: AuthMode; pathStyle: PathStyleSetting } {
    const { baseUrl, authMode } = this.channel;
    return { baseUrl, authMode, pathStyle: this.pathStyle.style ?? 'auto' };
  }

  [Symbol.for('nodejs.util.inspect.custom')](): string {
    return `ServiceClient ${JSON.stringify(this.toJSON())}`;
  }
}
