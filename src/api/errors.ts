// The service client's failures, one class per way a caller reacts: the service said no (ServiceError),
// the answer never came (NetworkError, TimeoutError), the answer made no sense, or our own report was bad.
import type { ErrorCode } from '../errors/catalogue.ts';
import { URL_SETTING, type TimeoutPhase } from './settings.ts';

export type { TimeoutPhase } from './settings.ts';
import type { Operation } from './types.ts';

/** Base of every error the service client throws; `instanceof ServiceClientError` catches them all. */
export class ServiceClientError extends Error {
  override name = 'ServiceClientError';
  /**
   * The catalogue's code (src/errors/catalogue.ts), e.g. `DFW_API_TIMEOUT`; on a ServiceError, the service's
   * own code instead (its catalogue code, DFW_API_STATUS, goes by its class).
   */
  readonly code: string | undefined = 'DFW_API_CLIENT' satisfies ErrorCode;
}

export interface ServiceErrorDetails {
  operation: Operation;
  status: number;
  code?: string | undefined;
  retryAfterMs?: number | undefined;
  serviceMessage?: string | undefined;
  bodySnippet?: string | undefined;
}

/** The service (or a proxy in front of it) answered with a non-2xx status. */
export class ServiceError extends ServiceClientError {
  override name = 'ServiceError';
  readonly operation: Operation;
  readonly status: number;
  /** The envelope's `code` (e.g. `NOT_FOUND`, `RATE_LIMIT`); undefined for `{message}`-only or non-JSON bodies. */
  override readonly code: string | undefined;
  /** From the `Retry-After` header (seconds or HTTP date), in milliseconds from when the answer arrived. */
  readonly retryAfterMs: number | undefined;
  /** The envelope's `message`, as the service wrote it. */
  readonly serviceMessage: string | undefined;
  /** The first 200 characters of a body that is not a JSON error envelope (an HTML page from a proxy, say). */
  readonly bodySnippet: string | undefined;

  constructor(details: ServiceErrorDetails) {
    super(describeServiceError(details));
    this.operation = details.operation;
    this.status = details.status;
    this.code = details.code;
    this.retryAfterMs = details.retryAfterMs;
    this.serviceMessage = details.serviceMessage;
    this.bodySnippet = details.bodySnippet;
  }

  /** Whether the same request may succeed later: rate limited (429), request timeout (408) or a server fault (5xx). */
  get retryable(): boolean {
    return this.status === 429 || this.status === 408 || this.status >= 500;
  }
}

/**
 * 412 PRECONDITION_FAILED: an update carried an `If-Match` version the resource no longer has (part 8), and
 * nothing changed. Read the resource again (a new ETag) and decide whether to apply the change to it.
 */
export class PreconditionFailedError extends ServiceError {
  override name = 'PreconditionFailedError';
}

function describeServiceError(d: ServiceErrorDetails): string {
  const head = `${d.operation} answered ${d.status}${d.code === undefined ? '' : ` (${d.code})`}`;
  let what: string;
  // The hint follows after '; ': a message's own closing full stop would read '.;'.
  if (d.serviceMessage !== undefined) what = `: ${d.serviceMessage.replace(/\.\s*$/, '')}`;
  else if (d.bodySnippet !== undefined && d.bodySnippet.trim() !== '')
    what = ` with a non-JSON body: ${d.bodySnippet}`;
  else what = ' with an empty body';
  return `${head}${what}${hintFor(d)}`;
}

function hintFor(d: ServiceErrorDetails): string {
  if (d.status === 401) return '; check that the API key is valid and has not been revoked';
  if (d.status === 403) return '; the API key lacks permission for this operation';
  if (d.status === 412)
    return '; the resource changed since it was read: read it again for its new ETag, then retry the update';
  if (d.status === 413) return '; the request body is larger than the service accepts';
  if (d.status === 429) {
    const after = d.retryAfterMs === undefined ? '' : ` (Retry-After: ${Math.ceil(d.retryAfterMs / 1000)} s)`;
    return `; the rate limit was exceeded, slow down and retry later${after}`;
  }
  if (d.status === 408 || d.status >= 500) return '; the service failed to answer, retry later';
  return '';
}

/** How far a failed request got, as far as this client can tell. */
export interface RequestReach {
  /** The request was fully written to the connection: the service may have received it and acted on it. */
  sent: boolean;
  /** The answer's status, when its headers arrived before the failure cut the body short. */
  answerStatus?: number | undefined;
  /** The first bytes of a body cut short (at most 64 KiB), as text; never logged (see NetworkError.answerPrefix). */
  answerPrefix?: string | undefined;
}

/** No answer: connection refused or reset, socket closed before the answer, DNS failure. */
export class NetworkError extends ServiceClientError {
  override name = 'NetworkError';
  override readonly code: ErrorCode = 'DFW_API_NETWORK';
  readonly operation: Operation;
  /** The request was fully written before the failure: the service may have acted on it. */
  readonly sent: boolean;
  /** The answer's status when its headers came before the failure; undefined when none came. */
  readonly answerStatus: number | undefined;
  /** Private, so no logger serialises it: a body holds the service's data (an execution's input). */
  readonly #answerPrefix: string | undefined;

  constructor(operation: Operation, message: string, cause: unknown, reach: RequestReach) {
    super(message, { cause });
    this.operation = operation;
    this.sent = reach.sent;
    this.answerStatus = reach.answerStatus;
    this.#answerPrefix = reach.answerPrefix;
  }

  /**
   * What arrived of a body cut short: a poll's may already name the execution it claimed, which can then be
   * read back by id rather than lost.
   */
  get answerPrefix(): string | undefined {
    return this.#answerPrefix;
  }

  /**
   * Whether the service may have carried the request out although its answer was lost: it was sent, and no
   * error status came back to say otherwise. For a poll, an execution may have been claimed for this client.
   */
  get mayHaveBeenApplied(): boolean {
    if (!this.sent) return false;
    return this.answerStatus === undefined || (this.answerStatus >= 200 && this.answerStatus <= 299);
  }
}

/** No answer in time; a kind of NetworkError so callers that treat both alike need one `instanceof`. */
export class TimeoutError extends NetworkError {
  override name = 'TimeoutError';
  override readonly code: ErrorCode = 'DFW_API_TIMEOUT';
  readonly phase: TimeoutPhase;

  constructor(
    operation: Operation,
    phase: TimeoutPhase,
    message: string,
    cause: unknown,
    reach: RequestReach,
  ) {
    super(operation, message, cause, reach);
    this.phase = phase;
  }
}

/** A 2xx answer whose body is not what the service documents (not JSON, a field missing or of the wrong type). */
export class ResponseValidationError extends ServiceClientError {
  override name = 'ResponseValidationError';
  override readonly code: ErrorCode = 'DFW_API_BAD_ANSWER';
  readonly operation: Operation;
  /** The offending field's path, e.g. `input` or `data[3].id`; `(body)` when the body itself is unusable. */
  readonly field: string;
  /** What is wrong, e.g. `field 'input' is not an object`. */
  readonly problem: string;
  /**
   * The `id` of an unusable task execution answer, when it holds one. A poll answer has claimed that
   * execution on the service even though it cannot be run: the caller can still report it FAILED.
   */
  readonly executionId: string | undefined;
  /** The setting the message tells the user to check, as the client names its URL (`DF_API_URL` in the daemon). */
  readonly urlSetting: string;

  constructor(
    operation: Operation,
    field: string,
    problem: string,
    executionId?: string,
    urlSetting = URL_SETTING,
  ) {
    super(
      `${operation} answer ${problem}; the service's answer does not match its documented shape ` +
        `(a proxy in between, or an API change): check ${urlSetting} and report this if it persists`,
    );
    this.operation = operation;
    this.field = field;
    this.problem = problem;
    this.executionId = executionId;
    this.urlSetting = urlSetting;
  }

  /** The same error, its message naming `urlSetting`: the client's name for its URL, which validators do not know. */
  naming(urlSetting: string): ResponseValidationError {
    if (urlSetting === this.urlSetting) return this;
    return new ResponseValidationError(
      this.operation,
      this.field,
      this.problem,
      this.executionId,
      urlSetting,
    );
  }
}

/** A report the service would refuse (status not COMPLETED/FAILED, output not a plain object); nothing was sent. */
export class ReportValidationError extends ServiceClientError {
  override name = 'ReportValidationError';
  override readonly code: ErrorCode = 'DFW_API_BAD_REPORT';
}
