// The HTTP edge of the client: one undici Pool with keep-alive and every timeout set, one request in, one
// fully-read Answer out, or a NetworkError/TimeoutError. It never retries: that is the scheduler's decision.
import { Pool } from 'undici';
import type { FormData } from 'undici';
import { NetworkError, TimeoutError } from './errors.ts';
import type { TimeoutPhase } from './errors.ts';
import type { Answer } from './response.ts';
import type { Operation } from './types.ts';

export interface TransportOptions {
  /** Scheme, host and port only; path prefixes are the path builder's business. */
  origin: string;
  connectTimeoutMs: number;
  headersTimeoutMs: number;
  bodyTimeoutMs: number;
  requestTimeoutMs: number;
  /** Most parallel connections; null for no limit. */
  connections: number | null;
}

export interface OutgoingRequest {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  /** Path with its query string. */
  path: string;
  headers: Record<string, string>;
  body?: string | FormData;
}

export class Transport {
  readonly #options: TransportOptions;
  readonly #pool: Pool;
  readonly #redact: (text: string) => string;

  constructor(options: TransportOptions, redact: (text: string) => string) {
    this.#options = options;
    this.#redact = redact;
    this.#pool = new Pool(options.origin, {
      connections: options.connections,
      connectTimeout: options.connectTimeoutMs,
      headersTimeout: options.headersTimeoutMs,
      bodyTimeout: options.bodyTimeoutMs,
      // Idle sockets are reused for 4 s, or as the server's Keep-Alive hint says: staying under common server
      // idle limits (node's 5 s) avoids sending a PATCH on a socket the server is closing.
      keepAliveTimeout: 4_000,
    });
  }

  /**
   * Sends one request and reads the whole body. A caller's abort rejects with the signal's reason untouched
   * (it is the caller's decision, not a network failure); every other failure becomes a NetworkError.
   */
  async send(operation: Operation, request: OutgoingRequest, signal?: AbortSignal): Promise<Answer> {
    signal?.throwIfAborted();
    const deadline = AbortSignal.timeout(this.#options.requestTimeoutMs);
    const combined = signal === undefined ? deadline : AbortSignal.any([signal, deadline]);
    try {
      const response = await this.#pool.request({
        method: request.method,
        path: request.path,
        headers: request.headers,
        body: request.body ?? null,
        signal: combined,
      });
      const text = await response.body.text();
      return { status: response.statusCode, headers: response.headers, text };
    } catch (error) {
      if (signal?.aborted === true) throw signal.reason;
      if (deadline.aborted) throw this.#timeout(operation, 'request', error);
      throw this.#networkError(operation, error);
    }
  }

  async close(): Promise<void> {
    if (!this.#pool.closed) await this.#pool.close();
  }

  #networkError(operation: Operation, error: unknown): NetworkError {
    const code = errorCode(error);
    if (code === 'UND_ERR_CONNECT_TIMEOUT') return this.#timeout(operation, 'connect', error);
    if (code === 'UND_ERR_HEADERS_TIMEOUT') return this.#timeout(operation, 'headers', error);
    if (code === 'UND_ERR_BODY_TIMEOUT') return this.#timeout(operation, 'body', error);
    if (code === 'UND_ERR_CLOSED' || code === 'UND_ERR_DESTROYED') {
      return new NetworkError(operation, `${operation} was not sent: the service client is closed`, error);
    }
    const detail = this.#redact(error instanceof Error ? error.message : String(error));
    return new NetworkError(
      operation,
      `${operation} got no answer from ${this.#options.origin} (${code ?? 'error'}: ${detail}); ` +
        `the request may or may not have been applied. Check the network and baseUrl, then retry`,
      error,
    );
  }

  #timeout(operation: Operation, phase: TimeoutPhase, error: unknown): TimeoutError {
    const { what, ms, setting } = describePhase(phase, this.#options);
    return new TimeoutError(
      operation,
      phase,
      `${operation} timed out ${what} from ${this.#options.origin} after ${ms} ms (${setting}); ` +
        `the service is slow or unreachable: retry later or raise ${setting}`,
      error,
    );
  }
}

function describePhase(
  phase: TimeoutPhase,
  options: TransportOptions,
): { what: string; ms: number; setting: string } {
  switch (phase) {
    case 'connect':
      return { what: 'connecting', ms: options.connectTimeoutMs, setting: 'connectTimeoutMs' };
    case 'headers':
      return {
        what: 'waiting for response headers',
        ms: options.headersTimeoutMs,
        setting: 'headersTimeoutMs',
      };
    case 'body':
      return { what: 'waiting for the response body', ms: options.bodyTimeoutMs, setting: 'bodyTimeoutMs' };
    case 'request':
      return {
        what: 'waiting for the whole answer',
        ms: options.requestTimeoutMs,
        setting: 'requestTimeoutMs',
      };
  }
}

function errorCode(error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' ? code : undefined;
}
