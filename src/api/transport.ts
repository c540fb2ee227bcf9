// The HTTP edge of the client: one undici Pool with keep-alive and every timeout set, one request in, one
// fully-read Answer out, or a NetworkError/TimeoutError saying how far the request got. It never retries:
// that is the scheduler's decision.
import { Pool } from 'undici';
import type { FormData } from 'undici';
import { AnswerReader } from './answer-reader.ts';
import { LimitExpired } from './answer-watch.ts';
import { NetworkError, TimeoutError } from './errors.ts';
import { adviseNetworkFailure } from './network-failure.ts';
import type { RequestReach, TimeoutPhase } from './errors.ts';
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
      // Ours instead (AnswerWatch): undici's act on a timer tick even when the answer is waiting in the socket.
      headersTimeout: 0,
      bodyTimeout: 0,
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
    const reader = new AnswerReader(this.#options);
    const onAbort = () => reader.abort(signal?.reason as Error);
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      this.#pool.dispatch(
        {
          method: request.method,
          path: request.path,
          headers: request.headers,
          body: request.body ?? null,
        },
        reader,
      );
      return await reader.answer;
    } catch (error) {
      if (signal?.aborted === true) throw signal.reason;
      const reach: RequestReach = { sent: reader.exchange !== 'sending', answerStatus: reader.status };
      if (error instanceof LimitExpired) throw this.#timeout(operation, error.phase, error, reach);
      throw this.#networkError(operation, error, reach);
    } finally {
      signal?.removeEventListener('abort', onAbort);
    }
  }

  async close(): Promise<void> {
    if (!this.#pool.closed) await this.#pool.close();
  }

  #networkError(operation: Operation, error: unknown, reach: RequestReach): NetworkError {
    const code = errorCode(error);
    if (code === 'UND_ERR_CONNECT_TIMEOUT') return this.#timeout(operation, 'connect', error, reach);
    if ((code === 'UND_ERR_CLOSED' || code === 'UND_ERR_DESTROYED') && !reach.sent) {
      return new NetworkError(
        operation,
        `${operation} was not sent: the service client is closed`,
        error,
        reach,
      );
    }
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
        what: 'waiting for an answer',
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
