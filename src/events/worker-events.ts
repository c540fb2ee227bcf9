// What the daemon core does, as typed events (as BullMQ's WorkerListener): the core and its parts (the
// scheduler, the pipeline, the runner, the sandbox, the cluster's coordinator) emit on the one emitter the
// core owns; telemetry (metrics, logs, traces) listens, the same way in standalone and clustered mode. Events
// tell: a payload is read-only, and frozen in development builds. What a listener contributes goes through
// the hooks (hooks.ts).
import { EventEmitter } from 'node:events';
import { deepFreeze } from './deep-freeze.ts';
import type {
  AttemptEvent,
  ClaimOrigin,
  ExecutionOutcome,
  PollAnswerLoss,
  PollResult,
  ReportResult,
} from './execution-types.ts';
import type { KeyFileRead, RateLimitPause, ResponseEvent } from './service-payloads.ts';

export type {
  AttemptEvent,
  ClaimOrigin,
  ExecutionOutcome,
  FailureKind,
  PollAnswerLoss,
  PollResult,
  ReportResult,
} from './execution-types.ts';
export { POLL_ANSWER_LOSSES } from './execution-types.ts';
export type { KeyFileRead, KeyFileReadResult, RateLimitPause, ResponseEvent } from './service-payloads.ts';

interface ExecutionRef {
  readonly task: string;
  readonly executionId: string;
}

/** Every payload as its listeners see it: read-only all the way down. */
type Payloads<M> = { [K in keyof M]: M[K] extends [infer P] ? [DeepReadonly<P>] : never };
type DeepReadonly<T> = T extends (...args: never[]) => unknown
  ? T
  : T extends object
    ? { readonly [K in keyof T]: DeepReadonly<T[K]> }
    : T;

interface EventMap {
  /** A poll of one task was answered (or failed); a hit names the execution it claimed. */
  poll: [
    {
      task: string;
      result: PollResult;
      durationMs: number;
      claimed?: { executionId: string; createdAt: string };
    },
  ];
  /**
   * A poll's answer was lost after it left: the service may hold an execution of the task claimed by this
   * worker between `polledAt` and `lostAt` (ISO instants) that no one will run or report.
   */
  pollAnswerLost: [
    {
      task: string;
      taskId: string;
      reason: PollAnswerLoss;
      polledAt: string;
      lostAt: string;
      /** The status of an answer that came but could not be read. */
      answerStatus?: number;
      /** The failure: its class name, message, stable code, and how far the request got. */
      error: { name: string; message: string; code?: string; phase?: string; sent?: boolean };
    },
  ];
  /** A request to the service ended (any operation). */
  response: [ResponseEvent];
  /**
   * DF_API_KEY_FILE was read again (it changed, or the service refused the key): a new key taken, the
   * refused one still there, or a file that holds no key (the key in use is kept).
   */
  apiKeyFile: [KeyFileRead];
  /** A 429 paused every request of the key. */
  rateLimited: [RateLimitPause];
  /** The task list was read and matched to the handlers: tasks polled, handlers without a task. */
  tasks: [{ served: readonly string[]; withoutTask: readonly string[] }];
  /**
   * An execution entered the pipeline: freshly claimed (told once its claim is journaled), or taken up again
   * from the journal or the queue. `origin`: how it reached this process through the cluster's queue. The
   * context it runs in is asked of the `executionScope` hook first, and the event is told inside it.
   */
  claim: [
    ExecutionRef & {
      createdAt?: string;
      /** The job the execution belongs to (`input.context.jobId`), when the service said. */
      jobId?: string;
      resumed: boolean;
      origin?: ClaimOrigin;
    },
  ];
  /**
   * A claimed execution is about to be added to the cluster's queue (clustered mode, on the coordinator). The
   * headers that travel in the job are asked of the `jobHeaders` hook just before.
   */
  queued: [ExecutionRef];
  /** A handler attempt started, or ended and how (its error's message redacted). */
  attempt: [ExecutionRef & AttemptEvent];
  /** A handler's `ctx.service` call ended (its URL without the query string: never the key). */
  serviceCall: [ExecutionRef & { attempt: number } & ResponseEvent];
  /**
   * A report attempt failed and the report is retried, in `retryInMs` (a failure), or once the 429 pause the
   * budget heard ends (`rateLimited`).
   */
  reportRetry: [
    ExecutionRef & {
      attempt: number;
      retryInMs: number;
      rateLimited: boolean;
      error: { name: string; message: string };
    },
  ];
  /** An execution's handler attempts ended with its outcome (before the report). */
  outcome: [ExecutionRef & { outcome: ExecutionOutcome }];
  /** An execution's report ended; `status`: what was reported (or was to be). */
  report: [ExecutionRef & { result: ReportResult; attempts: number; status: ExecutionOutcome['status'] }];
  /**
   * Another replica delivered the report of an execution of job `jobId` (clustered mode, on the coordinator,
   * within a heartbeat of it; see clustered/cluster-reports.ts): successor pacing reads it as its own reports.
   */
  replicaReport: [ExecutionRef & { jobId: string }];
  /**
   * The service refused a report for good (400, 404, 409, 410, 412...): its status, code and message. The
   * execution is dead-lettered once; the core then polls its task at once, as the service has likely queued
   * the work again (a claim that outlived its response timeout).
   */
  reportRefused: [ExecutionRef & { status: number; code?: string; message: string }];
  /**
   * A request was dropped before it left because this process may no longer own what it acts for: a report of
   * an execution whose job lock it lost, or a poll of a coordinator whose lease term ended (clustered mode).
   */
  fenced: [{ request: 'report' | 'poll'; task?: string; executionId?: string }];
  /**
   * A poll handed out an execution still owed a report (running, or finished and not yet reported): it was not
   * run again. `where`: the replica that still runs it (`pipeline`), or the cluster's queue (`queue`, on the
   * coordinator: a job of the execution is not finished).
   */
  redelivered: [
    ExecutionRef & {
      where: 'pipeline' | 'queue';
      /** The queue's job that still holds it (`queue`). */
      jobId?: string;
      /** Told already for this claim in hand (`pipeline`): the same redelivery seen again. */
      again?: boolean;
    },
  ];
  /** A record left by an earlier run (journal or queue) was taken up again. */
  replay: [{ phase: 'claimed' | 'finished' }];
  /** Records owed a report, and dead letters, in the journal (standalone) after a change. */
  journal: [{ pending: number; deadLettered: number }];
  /** A handler worker (thread or process) started, or ended and why. */
  handlerWorker: [{ started: true } | { started: false; reason: string }];
  /** This replica took or gave up the coordinator lease (clustered mode). */
  lease: [{ held: boolean; reason?: string }];
  /** Redis answered a command with an error, or the connection failed (clustered mode), by kind (see
   * clustered/redis-health.ts: auth, tls, oom, readonly, unreachable, timeout, other). */
  redisError: [{ kind: string }];
}

export type WorkerEventMap = Payloads<EventMap>;

export interface WorkerEventsOptions {
  /**
   * Deep-freezes each payload before its listeners see it, so a listener that writes one throws. Default: on
   * where NODE_ENV is `test` (as under vitest) or `development`, off otherwise (its cost: ~3 µs an emit), so a
   * daemon started without NODE_ENV does not pay it.
   */
  freezePayloads?: boolean;
}

export class WorkerEvents extends EventEmitter<WorkerEventMap> {
  readonly #freeze: boolean;

  constructor(options: WorkerEventsOptions = {}) {
    super();
    this.#freeze =
      options.freezePayloads ?? (process.env.NODE_ENV === 'test' || process.env.NODE_ENV === 'development');
  }

  override emit<K extends keyof WorkerEventMap>(event: K, ...payload: WorkerEventMap[K]): boolean {
    if (this.#freeze) deepFreeze(payload[0]);
    return (super.emit as (event: K, ...payload: WorkerEventMap[K]) => boolean)(event, ...payload);
  }
}

/**
 * What a part that only tells needs of the emitter (the service client, the budget, the key file, Redis's
 * health): it emits, and may ask whether anyone listens before it builds a costly payload.
 */
export type EventSink = Pick<WorkerEvents, 'emit' | 'listenerCount'>;
