// What stands in front of the emulated service, for every service request over HTTP or in process: the request
// log, the fault table, the API key and the per-key rate limit, in the order a gateway applies them.
import { performance } from 'node:perf_hooks';
import type { Clock } from '../clock/clock.ts';
import type { FaultTable } from './faults.ts';
import type { RateLimiter } from './limits.ts';
import { matchRoute } from './routes.ts';
import type { RouteMatch } from './routes.ts';
import { serves, type ServedSpelling } from './path-spelling.ts';
import { answerService } from './service.ts';
import type { Store } from './store.ts';
import type { FaultRule, RequestRecord } from './types.ts';
import { errorAnswer, messageAnswer } from './wire.ts';
import type { Answer, RequestBody } from './wire.ts';

const ERROR_CODES: Record<number, string> = {
  400: 'BAD_REQUEST',
  401: 'UNAUTHENTICATED',
  404: 'NOT_FOUND',
  412: 'PRECONDITION_FAILED',
  429: 'RATE_LIMIT',
};

/** What the gateway works with: the emulator's own state, shared (setApiKeys changes `apiKeys` in place). */
export interface GatewayParts {
  clock: Clock;
  apiKeys: ReadonlySet<string>;
  spelling: ServedSpelling;
  store: Store;
  limiter: RateLimiter;
  faults: FaultTable;
  maxUploadBytes: number;
}

export class ServiceGateway {
  readonly #clock: Clock;
  readonly #apiKeys: ReadonlySet<string>;
  readonly #spelling: ServedSpelling;
  readonly #store: Store;
  readonly #limiter: RateLimiter;
  readonly #faults: FaultTable;
  readonly #maxUploadBytes: number;
  /** Every service request that arrived, in order; a record is completed when its answer goes out. */
  requests: RequestRecord[] = [];
  /** Pending latency faults, released when the emulator closes so no handler outlives it. */
  readonly #delays = new Set<() => void>();

  constructor(parts: GatewayParts) {
    this.#clock = parts.clock;
    this.#apiKeys = parts.apiKeys;
    this.#spelling = parts.spelling;
    this.#store = parts.store;
    this.#limiter = parts.limiter;
    this.#faults = parts.faults;
    this.#maxUploadBytes = parts.maxUploadBytes;
  }

  /** Ends every pending latency fault: its request is dropped. */
  releaseDelays(): void {
    for (const release of this.#delays) release();
  }

  /** Runs one service request; `deliver` sends the answer (undefined: drop the connection), false if it could not. */
  async serve(call: ServiceCall, deliver: (answer: Answer | undefined) => boolean): Promise<void> {
    const startedAt = performance.now();
    const { method, url } = call;
    const route = serves(this.#spelling, url.pathname) ? matchRoute(method, url.pathname) : undefined;
    const apiKey = apiKeyOf(call.headers, url);
    const at = this.#clock.now();
    const record: RequestRecord = {
      at,
      earliestAt: Math.min(call.earliestAt ?? at, at),
      method,
      path: url.pathname,
      operation: route?.operation ?? 'unknown',
      status: 0,
      apiKeyValid: apiKey !== undefined && this.#apiKeys.has(apiKey),
      rateLimited: false,
    };
    this.requests.push(record);
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
    const decision = this.#limiter.take(apiKey!, nowMs, record.earliestAt);
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

/** A service request, from a socket or in process. */
export interface ServiceCall {
  method: string;
  url: URL;
  /** Lower-case names, as node:http gives them. */
  headers: Record<string, string | string[] | undefined>;
  body: () => Promise<RequestBody>;
  /** The earliest instant the request may have come, when the emulator was blind before it (ArrivalWatch). */
  earliestAt?: number;
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
