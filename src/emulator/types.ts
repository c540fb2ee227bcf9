// Public shapes of the emulator: its options, what it records about executions and requests, and the
// rules of its fault table. Kept apart from the server so callers can import types without runtime code.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Clock } from '../clock/clock.ts';
import type { ServedSpelling } from './path-spelling.ts';
import type {
  JsonObject,
  Operation,
  ReportStatus,
  TaskExecution,
  TaskExecutionStatus,
  Variable,
} from '../api/types.ts';

/**
 * Every service operation the emulator answers: the client's, and the service's variable routes that
 * df-worker itself never sends (create, list, find) but a test, a tool or a handler's own HTTP client may.
 */
export type EmulatorOperation = Operation | 'variables.create' | 'variables.list' | 'variables.find';

/** Request budgets per API key (service API part 8). 0 or Infinity disables that limit. */
export interface EmulatorLimits {
  /** Requests accepted in any sliding 1 s window. Default: the service's (api/service-limits.ts). */
  perSecond: number;
  /** Requests accepted in any sliding 60 s window. Default: the service's. */
  perMinute: number;
  /** Requests accepted in one calendar month, UTC. Default: the service's. */
  perMonth: number;
}

export interface EmulatorOptions {
  /** Accepted API keys. Default `['emulator-key']`. */
  apiKeys?: string[];
  /** Per-key limits; missing members take the service's (api/service-limits.ts). */
  limits?: Partial<EmulatorLimits>;
  /** Time for rate-limit windows and record timestamps. Default `systemClock`. */
  clock?: Clock;
  /** Largest request body accepted, in bytes; larger bodies get 413 `{message}`. Default 100 MiB, the service's. */
  maxUploadBytes?: number;
  /**
   * Which spelling of the data-factory paths it serves: `both` (default), `underscore` or `hyphen`; the other
   * spelling then gets the 404 of an unknown route.
   */
  pathStyle?: ServedSpelling;
  /** Seeds the PRNG that decides probabilistic fault rules, so tests are deterministic. Default 1. */
  seed?: number;
  /**
   * When set, every admin route but `GET /__admin` needs `Authorization: Bearer <adminToken>`, so a web page
   * or another user of the machine cannot drive a loopback emulator. Default: none (the admin surface is open).
   */
  adminToken?: string;
  /**
   * Response timeouts by task id or key (Conductor's `responseTimeoutSeconds`): an execution claimed and not
   * reported in time is timed out and queued again. A `responseTimeout` fault rule takes precedence. Default:
   * none (a claimed execution waits for its report forever).
   */
  responseTimeouts?: Record<string, ResponseTimeout>;
  /**
   * Host names (lower case, no port) answered besides loopback names and IP addresses, e.g. a container's
   * service name. Any other `Host` is answered 421 (a page that resolves its own name to the emulator). Default none.
   */
  allowedHosts?: string[];
  /** Called after each execution is enqueued (in process or by the admin route), e.g. to wake a worker. */
  onEnqueue?: (execution: EmulatedExecution) => void;
}

/**
 * How a timed-out execution is queued again. `new-execution`: the old id ends `TIMED_OUT` and a copy with a new
 * id and the same input is queued (Conductor's retried task). `same-id`: the same id is pending again.
 */
export type RequeueMode = 'new-execution' | 'same-id';

/** An execution claimed and not reported within `ms` is timed out and queued again (`requeue`). */
export interface ResponseTimeout {
  /** From the claim (the poll that handed it out) to the report, in ms of the emulator's clock. */
  ms: number;
  /** Default `new-execution`. */
  requeue?: RequeueMode;
}

/** The service's statuses, and `TIMED_OUT`: an execution its claimer did not report in time (new-execution mode). */
export type EmulatedStatus = TaskExecutionStatus | 'TIMED_OUT';

/** An execution as the emulator keeps it: the service's record plus what tests want to inspect. */
export interface EmulatedExecution extends Omit<TaskExecution, 'status'> {
  status: EmulatedStatus;
  taskKey: string;
  /** When a poll handed it out (ISO 8601); absent while pending. */
  claimedAt?: string;
  /** Every accepted PATCH, in arrival order. */
  reports: { at: string; status: ReportStatus; output: JsonObject }[];
  /** Each claim that ran past its response timeout: when, and the id queued in its place (its own in same-id mode). */
  timeouts?: { at: string; claimedAt: string; requeuedAs: string }[];
  /** The timed-out execution this one was queued in place of (new-execution mode). */
  requeuedFrom?: string;
}

/** One service request (admin requests are not recorded). */
export interface RequestRecord {
  /** Clock milliseconds when the request arrived (when the emulator's event loop got to it). */
  at: number;
  /**
   * The earliest it may have arrived: before `at` by the blind spell the emulator's loop had just come out of
   * (a stalled process; see ArrivalWatch), else within a tick of it. Count windows with busiestWindow().
   */
  earliestAt: number;
  method: string;
  /** Path as sent, without the query string. */
  path: string;
  operation: EmulatorOperation | 'unknown';
  /** Status answered, or 0 when the connection was dropped without an answer. */
  status: number;
  apiKeyValid: boolean;
  /** Answered 429, by the limiter or by a fault rule. */
  rateLimited: boolean;
  /** Real (monotonic) milliseconds from arrival to answer or drop, including injected latency. */
  latencyMs?: number;
}

/**
 * A rule of the fault table. Rules are tried in order; the first that applies to a request wins. The format,
 * with an example of each kind, is in handlers/README.md, "Fault rules".
 */
export type FaultRule = {
  /** Operation the rule targets. Default `'*'` (every service request, unknown routes included). */
  operation?: EmulatorOperation | '*';
  /** Restrict to requests about this task (its CRUD and poll, and its executions). */
  taskId?: string;
  /** Chance, 0..1, that the rule applies to a matching request. Default 1. */
  probability?: number;
  /** Apply at most this many times, then the rule is spent. Default unlimited. */
  count?: number;
} &
  // Answer this raw status instead of handling the request; without `body`, a JSON error envelope.
  (
    | {
        kind: 'status';
        status: number;
        body?: string;
        contentType?: string;
        headers?: Record<string, string>;
      }
    // 429 RATE_LIMIT envelope, with a Retry-After header when given.
    | { kind: 'rateLimit'; retryAfterSeconds?: number }
    // Delay the answer by real milliseconds (setTimeout), then handle the request normally.
    | { kind: 'latency'; ms: number }
    // Handle the request (state changes, e.g. a PATCH is applied), then destroy the socket unanswered.
    | { kind: 'dropAfterApply' }
    // Destroy the socket without handling the request.
    | { kind: 'drop' }
    // Not a request fault: executions this rule's poll claims time out `ms` after the claim (see ResponseTimeout);
    // `count` is how many executions it times out, `probability` is drawn once per claim.
    | { kind: 'responseTimeout'; ms: number; requeue?: RequeueMode }
  );

/** What a variable update may change (part 4.7); checked by the service layer before it reaches the store. */
export type VariableChanges = Pick<Variable, 'key' | 'name' | 'value' | 'secret' | 'status'>;

/** A variable created in process or by the admin route: `name` defaults to `key`, `secret` to false. */
export interface NewVariable {
  /** The variable's id; default: the next `variable-N`, as the service's create gives. */
  id?: string;
  key: string;
  value: string;
  name?: string;
  secret?: boolean;
}

/** Pages served under `path` by the emulator's own server (e.g. `/console`). */
export interface EmulatorPages {
  /** Without a trailing slash, e.g. `/console`. */
  path: string;
  serve(request: IncomingMessage, response: ServerResponse, url: URL): Promise<void>;
}
