// The HTTP edge of the client: one node:http agent with keep-alive and every timeout set, one request in, one
// fully-read Answer out, or a NetworkError/TimeoutError saying how far the request got. It never retries:
// that is the scheduler's decision.
// node:http rather than undici: its parser is native, where undici's is WebAssembly whose optimising compile
// leaves some 10 MB in the process for good, and undici's code is 4 MB of heap more (bench:footprint).
import type http from 'node:http';
import { AnswerReader } from './answer-reader.ts';
import { LimitExpired } from './answer-watch.ts';
import { NetworkError, TimeoutError } from './errors.ts';
import { adviseNetworkFailure } from './network-failure.ts';
import type { RequestReach, TimeoutPhase } from './errors.ts';
import type { Answer } from './response.ts';
import { TIMEOUT_SETTINGS } from './settings.ts';
import type { Operation } from './types.ts';

export interface TransportOptions {
  /** Scheme, host and port only; path prefixes are the path builder's business. */
  origin: string;
  connectTimeoutMs: number;
  headersTimeoutMs: number;
  bodyTimeoutMs: number;
  requestTimeoutMs: number;
  /** From sending to the body's last byte, in ms. */
  answerTimeoutMs: number;
  /** How timeout errors name each limit; default the daemon's DF_* setting for it (settings.ts). */
  timeoutSettings?: Partial<Record<TimeoutPhase, string>>;
  /** Most parallel connections; null for no limit. */
  connections: number | null;
  /** How network errors name the setting that holds the URL, e.g. `DF_API_URL`. */
  urlSetting: string;
}

export interface OutgoingRequest {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  /** Path with its query string. */
  path: string;
  headers: Record<string, string>;
  body?: string | FormData;
}

/** How much of a body cut short its error keeps: enough for the fields a service sends first. */
const ANSWER_PREFIX_BYTES = 64 * 1024;

/** How long an idle socket is kept for the next request, in ms. */
const KEEP_ALIVE_MS = 4_000;

export class Transport {
  readonly #options: TransportOptions;
  readonly #origin: URL;
  readonly #agent: http.Agent;
  readonly #request: typeof http.request;
  readonly #redact: (text: string) => string;
  /** Requests under way: close() lets them finish. */
  readonly #inFlight = new Set<Promise<unknown>>();
  #closed = false;

  constructor(options: TransportOptions, redact: (text: string) => string) {
    this.#options = options;
    this.#redact = redact;
    this.#origin = new URL(options.origin);
    const secure = this.#origin.protocol === 'https:';
    const agentOptions: http.AgentOptions = {
      keepAlive: true,
      // Idle sockets are reused for 4 s, or less as the server's Keep-Alive hint says (node takes 1 s off it):
      // staying under common server idle limits (node's 5 s) avoids sending a PATCH on a socket being closed.
      timeout: KEEP_ALIVE_MS,
      maxSockets: options.connections ?? Infinity,
    };
    // Taken with process.getBuiltinModule, not an ESM import: the import's namespace reads every export of
    // node:http, and its lazy WebSocket, CloseEvent and MessageEvent load node's own undici (5 MB more resident
    // memory, measured in a bare node). node:https (TLS, about 9 MB more) only for https.
    const stack = process.getBuiltinModule(secure ? 'node:https' : 'node:http');
    this.#agent = new stack.Agent(agentOptions);
    this.#request = stack.request;
  }

  /**
   * Sends one request and reads the whole body. A caller's abort rejects with the signal's reason untouched
   * (it is the caller's decision, not a network failure); every other failure becomes a NetworkError.
   */
  async send(
    operation: Operation,
    request: OutgoingRequest,
    signal?: AbortSignal,
    onSent?: () => void,
  ): Promise<Answer> {
    signal?.throwIfAborted();
    if (this.#closed) {
      throw new NetworkError(
        operation,
        `${operation} was not sent: the service client is closed`,
        undefined,
        {
          sent: false,
          answerStatus: undefined,
        },
      );
    }
    const reader = new AnswerReader(this.#options);
    const onAbort = () => reader.abort(signal?.reason as Error);
    signal?.addEventListener('abort', onAbort, { once: true });
    const settled = reader.answer.catch(() => undefined);
    this.#inFlight.add(settled);
    try {
      const { data, headers } = await encodeBody(request);
      reader.read(
        this.#request({
          protocol: this.#origin.protocol,
          hostname: this.#origin.hostname,
          port: this.#origin.port,
          method: request.method,
          path: request.path,
          headers,
          agent: this.#agent,
        }).end(data),
        onSent,
      );
      return await reader.answer;
    } catch (error) {
      if (signal?.aborted === true) throw signal.reason;
      const reach: RequestReach = {
        sent: reader.exchange !== 'sending',
        answerStatus: reader.status,
        answerPrefix: reader.received(ANSWER_PREFIX_BYTES),
      };
      if (error instanceof LimitExpired) throw this.#timeout(operation, error.phase, error, reach);
      throw this.#networkError(operation, error, reach);
    } finally {
      signal?.removeEventListener('abort', onAbort);
      this.#inFlight.delete(settled);
    }
  }

  /** Lets the requests under way finish, then closes the sockets; later requests fail without being sent. */
  async close(): Promise<void> {
    this.#closed = true;
    await Promise.all(this.#inFlight);
    this.#agent.destroy();
  }

  #networkError(operation: Operation, error: unknown, reach: RequestReach): NetworkError {
    const code = errorCode(error);
    const { origin, urlSetting } = this.#options;
    const applied = reach.sent ? 'the request may or may not have been applied' : 'the request was not sent';
    const advice =
      reach.answerStatus === undefined
        ? adviseNetworkFailure(code, origin, urlSetting, reach.sent)
        : undefined;
    if (advice !== undefined) {
      return new NetworkError(
        operation,
        `${operation} ${lostWhat(reach, origin)}: ${advice.cause}; ${applied}. ${advice.advice}`,
        error,
        reach,
      );
    }
    const detail = this.#redact(error instanceof Error ? error.message : String(error));
    return new NetworkError(
      operation,
      `${operation} ${lostWhat(reach, origin)} (${code ?? 'error'}: ${detail}); ${applied}. ` +
        `Check the network and ${urlSetting}, then retry`,
      error,
      reach,
    );
  }

  #timeout(operation: Operation, phase: TimeoutPhase, error: unknown, reach: RequestReach): TimeoutError {
    const { what, ms, setting } = describePhase(phase, this.#options);
    return new TimeoutError(
      operation,
      phase,
      `${operation} timed out ${what} from ${this.#options.origin} after ${ms} ms (${setting}); ` +
        `the service is slow or unreachable: retry later or raise ${setting}`,
      error,
      reach,
    );
  }
}

function lostWhat(reach: RequestReach, origin: string): string {
  if (reach.answerStatus !== undefined)
    return `lost the rest of its ${reach.answerStatus} answer from ${origin}`;
  return reach.sent ? `got no answer from ${origin}` : `could not reach ${origin}`;
}

const PHASES: Record<TimeoutPhase, { what: string; option: keyof TransportOptions & `${string}Ms` }> = {
  connect: { what: 'connecting', option: 'connectTimeoutMs' },
  headers: { what: 'waiting for response headers', option: 'headersTimeoutMs' },
  body: { what: 'waiting for the response body', option: 'bodyTimeoutMs' },
  request: { what: 'waiting for an answer', option: 'requestTimeoutMs' },
  answer: { what: 'reading the whole answer', option: 'answerTimeoutMs' },
};

function describePhase(
  phase: TimeoutPhase,
  options: TransportOptions,
): { what: string; ms: number; setting: string } {
  const { what, option } = PHASES[phase];
  return { what, ms: options[option], setting: options.timeoutSettings?.[phase] ?? TIMEOUT_SETTINGS[phase] };
}

/** The body as bytes with the headers that describe it; a form is encoded as multipart/form-data. */
async function encodeBody(
  request: OutgoingRequest,
): Promise<{ data: Buffer | undefined; headers: Record<string, string> }> {
  const { body, headers } = request;
  if (body === undefined) return { data: undefined, headers };
  if (typeof body === 'string') {
    const data = Buffer.from(body);
    return { data, headers: { ...headers, 'content-length': String(data.length) } };
  }
  // Only uploads send a form: Node's own Response encodes it (and its boundary) on first use.
  const encoded = new Response(body);
  const data = Buffer.from(await encoded.arrayBuffer());
  const contentType = encoded.headers.get('content-type') ?? 'multipart/form-data';
  return {
    data,
    headers: { ...headers, 'content-type': contentType, 'content-length': String(data.length) },
  };
}

function errorCode(error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' ? code : undefined;
}
