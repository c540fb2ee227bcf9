// What a ServiceClient is built from: its options (every limit with its default and unit), what the daemon plugs
// in (the budget gate, the emitter its requests are told on, another transport) and the shapes of what its
// methods take.
import type { ApiKeySource } from '../secrets/api-key-file.ts';
import { readFileSync } from 'node:fs';
import type { Clock } from '../clock/clock.ts';
import type { EventSink } from '../events/worker-events.ts';
import type { TimeoutPhase } from './errors.ts';
import type { PathStyleSetting } from './path-style.ts';
import type { Answer } from './response.ts';
import { TIMEOUT_SETTINGS } from './settings.ts';
import { Transport } from './transport.ts';
import type { OutgoingRequest } from './transport.ts';
import type { JsonObject, Operation, ReportStatus } from './types.ts';

export type { ResponseEvent } from '../events/service-payloads.ts';

/** The daemon's budget: every request waits for a slot before it is sent, and the budget hears every answer. */
export interface RequestGate {
  /**
   * Resolves when `operation` may be sent; rejects (e.g. with the signal's reason) to cancel the request. A gate
   * that counts sends in time windows resolves a permit, to be told when the request really left.
   */
  acquire(operation: Operation, signal?: AbortSignal): Promise<SendPermit | void>;
  /**
   * Told of every answer to a request the gate let through, before the caller sees it: the gate alone decides
   * how the key's budget reacts (a 429 pauses every request), so a caller that retries just retries.
   */
  observe?(answer: GateAnswer): void;
}

/**
 * A send the gate let through. The gate counted it when it let it go; the request may leave later (a fence
 * checked in Redis, a connection opened, a stalled event loop) while the service counts it when it arrives, so
 * the count moves to when it left.
 */
export interface SendPermit {
  /** The request left now, or got further now (its bytes reached the socket): the latest instant told counts. */
  departed(): void;
}

/** What the gate learns of an answer. Carries no URL, header or body, so it can never leak the API key. */
export interface GateAnswer {
  operation: Operation;
  /** HTTP status of the answer. */
  status: number;
  /** From the answer's `Retry-After` header, in milliseconds; undefined when absent or unreadable. */
  retryAfterMs: number | undefined;
}

export interface ServiceClientOptions {
  /** Service base address, e.g. `https://api.example.com` or the emulator's URL; may carry a path prefix. */
  baseUrl: string;
  /**
   * How error messages name the setting `baseUrl` came from, so they say what to change. Default `'DF_API_URL'`,
   * the daemon's and the CLI's.
   */
  urlSetting?: string;
  /** The API key. Never logged, never in an error message or event. */
  apiKey: string;
  /**
   * Where the key is read for each request when it may change while the client lives (DF_API_KEY_FILE
   * re-read); `apiKey` is then the key at start. Every key it held is redacted like `apiKey`.
   */
  apiKeySource?: ApiKeySource;
  /**
   * The clock the budget runs on: its monotonic face places the service's `Date` headers (see ServiceClock);
   * its wall clock reads a Retry-After date when an answer has no Date. Default the system's.
   */
  clock?: Pick<Clock, 'now' | 'monotonic'>;
  /** How the key travels: `X-Api-Key` header, `Authorization: Bearer`, or `api_key` in the URL (opt-in only: URLs end up in logs). Default `'header'`. */
  authMode?: 'header' | 'query' | 'bearer';
  /**
   * `data_factory/task_executions` (underscore), `data-factory/task-executions` (hyphen), or `auto`: found by a
   * the first task list (underscore first; before any other first request, a task list of size 1), then kept.
   * Default `'hyphen'`, as before `auto` existed; the daemon's DF_API_PATH_STYLE defaults to `auto`.
   */
  pathStyle?: PathStyleSetting;
  /** Time to establish a connection, ms. Default 5_000. */
  connectTimeoutMs?: number;
  /** Time from sending to the response headers, ms. Default 15_000. */
  headersTimeoutMs?: number;
  /** Longest idle time between body chunks, ms. Default 15_000. */
  bodyTimeoutMs?: number;
  /**
   * Deadline from sending a request (gate wait excluded, connecting included) to the answer's headers, ms. The
   * body then runs as long as chunks keep coming within `bodyTimeoutMs`. Default 30_000.
   */
  requestTimeoutMs?: number;
  /**
   * Deadline of the whole answer, from sending to the body's last byte, however its chunks are spaced, ms: an
   * answer that trickles fails with a TimeoutError (phase `answer`). Default 60_000.
   */
  answerTimeoutMs?: number;
  /**
   * How timeout errors name each limit, so they say what to change. Default: the daemon's setting for it
   * (`DF_API_BODY_TIMEOUT_MS` for `bodyTimeoutMs`, see settings.ts).
   */
  timeoutSettings?: Partial<Record<TimeoutPhase, string>>;
  /**
   * Most parallel connections. Default: no limit. A request the budget let through must leave at once: one
   * held in a queue for a busy connection would leave later in a burst with others the budget counted apart.
   * The budget and the daemon's concurrency bound the connections in use.
   */
  connections?: number;
  /** Budget gate awaited before every request. Default: none. */
  gate?: RequestGate;
  /**
   * Where each request is told once it ended (`response`, for metrics and the key's rotation), and each
   * request of a client made by forAttempt() (`serviceCall`, for traces); whatever a listener throws is
   * swallowed. Default: none, nothing is told.
   */
  events?: EventSink;
  /** Default `df-worker/<package version>`. */
  userAgent?: string;
  /**
   * Carries the requests instead of HTTP (the timeouts and `connections` above then do not apply): the
   * month replay answers them in process, in virtual time. Default: node:http(s) with keep-alive.
   */
  transport?: ServiceTransport;
}

/** What carries a request to the service and brings its answer back. */
export interface ServiceTransport {
  /** `onSent` is told once the request has been handed over whole (for HTTP: written to its socket). */
  send(
    operation: Operation,
    request: OutgoingRequest,
    signal?: AbortSignal,
    onSent?: () => void,
  ): Promise<Answer>;
  close(): Promise<void>;
}

/** What a client reports for a claimed execution (part 4.2: only status and output are updatable). */
export interface ExecutionReport {
  status: ReportStatus;
  output: JsonObject;
}

export interface FileUpload {
  name: string;
  data: Uint8Array | Blob;
  /** Default: the Blob's own type, or `application/octet-stream`. */
  contentType?: string;
}

export interface VariableUpdateOptions {
  /**
   * The ETag a read returned: the update applies only if the variable still has that version, else it is
   * refused with PreconditionFailedError (412) and nothing changes. Default: none, the update is unconditional.
   */
  ifMatch?: string;
  signal?: AbortSignal;
}

/** The limits' defaults, in ms, by the option that overrides each. */
const TIMEOUT_DEFAULTS = {
  connectTimeoutMs: 5_000,
  headersTimeoutMs: 15_000,
  bodyTimeoutMs: 15_000,
  requestTimeoutMs: 30_000,
  answerTimeoutMs: 60_000,
} as const;

const PHASE_OF: Record<keyof typeof TIMEOUT_DEFAULTS, TimeoutPhase> = {
  connectTimeoutMs: 'connect',
  headersTimeoutMs: 'headers',
  bodyTimeoutMs: 'body',
  requestTimeoutMs: 'request',
  answerTimeoutMs: 'answer',
};

/** The node:http transport the options describe, each limit checked and named as the user set it. */
export function httpTransport(
  options: ServiceClientOptions,
  origin: string,
  urlSetting: string,
  redact: (text: string) => string,
): Transport {
  const timeoutSettings = { ...TIMEOUT_SETTINGS, ...options.timeoutSettings };
  const limit = (option: keyof typeof TIMEOUT_DEFAULTS): number =>
    positive(options[option], TIMEOUT_DEFAULTS[option], `${option} (${timeoutSettings[PHASE_OF[option]]})`);
  return new Transport(
    {
      origin,
      connectTimeoutMs: limit('connectTimeoutMs'),
      headersTimeoutMs: limit('headersTimeoutMs'),
      bodyTimeoutMs: limit('bodyTimeoutMs'),
      requestTimeoutMs: limit('requestTimeoutMs'),
      answerTimeoutMs: limit('answerTimeoutMs'),
      timeoutSettings,
      connections: options.connections === undefined ? null : positive(options.connections, 0, 'connections'),
      urlSetting,
    },
    redact,
  );
}

function positive(value: number | undefined, fallback: number, name: string): number {
  if (value === undefined) return fallback;
  if (!Number.isFinite(value) || value <= 0)
    throw new RangeError(`${name} must be a positive number, got ${value}`);
  return value;
}

let cachedVersion: string | undefined;

/** `df-worker/<package version>`, the default User-Agent. */
export function defaultUserAgent(): string {
  return `df-worker/${packageVersion()}`;
}

function packageVersion(): string {
  if (cachedVersion !== undefined) return cachedVersion;
  try {
    const text = readFileSync(new URL('../../package.json', import.meta.url), 'utf8');
    const version = (JSON.parse(text) as { version?: unknown }).version;
    cachedVersion = typeof version === 'string' ? version : '0.0.0';
  } catch {
    cachedVersion = '0.0.0';
  }
  return cachedVersion;
}
