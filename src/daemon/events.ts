// What the daemon core does, as typed events (as BullMQ's WorkerListener): the core and its parts emit,
// telemetry (metrics, logs, traces) listens in one place, the same way in standalone and clustered mode.
import { EventEmitter } from 'node:events';
import type { ResponseEvent } from '../api/client.ts';
import type { RateLimitPause } from '../budget/budget.ts';
import type { KeyFileReadResult } from '../secrets/api-key-file.ts';
import type { AttemptEvent, ExecutionOutcome } from '../runner/run-execution.ts';
import type { PollAnswerLoss, PollResult, SchedulerOptions } from '../scheduler/scheduler.ts';
import type { TraceSlot } from '../tracing/trace-slot.ts';

/** How a report ended: accepted, refused for good (a dead letter), or kept for a later run. */
export type ReportResult = 'delivered' | 'dead-lettered' | 'left-in-journal';

export interface WorkerEventMap {
  /** A poll of one task was answered (or failed); a hit names the execution it claimed. */
  poll: [
    {
      task: string;
      result: PollResult;
      durationMs: number;
      claimed?: { executionId: string; createdAt: string };
    },
  ];
  /** A poll's answer was lost after it left: the execution it may have claimed is looked for again. */
  pollAnswerLost: [{ task: string; reason: PollAnswerLoss }];
  /** A request to the service ended (any operation). */
  response: [ResponseEvent];
  /**
   * DF_API_KEY_FILE was read again (it changed, or the service refused the key): a new key taken, the
   * refused one still there, or a file that holds no key (the key in use is kept).
   */
  apiKeyFile: [{ result: KeyFileReadResult }];
  /** A 429 paused every request of the key. */
  rateLimited: [RateLimitPause];
  /** The task list was read and matched to the handlers: tasks polled, handlers without a task. */
  tasks: [{ served: readonly string[]; withoutTask: readonly string[] }];
  /**
   * An execution entered the pipeline: freshly claimed, or taken up again from the journal or the queue.
   * `origin`: how it reached this process through the cluster's queue. `trace`: a listener that traces may
   * give the pipeline a context to run the execution in (its log lines then carry its trace).
   */
  claim: [
    {
      task: string;
      executionId: string;
      createdAt?: string;
      /** The job the execution belongs to (`input.context.jobId`), when the service said. */
      jobId?: string;
      resumed: boolean;
      origin?: ClaimOrigin;
      trace: TraceSlot;
    },
  ];
  /**
   * A claimed execution is about to be added to the cluster's queue (clustered mode, on the coordinator). A
   * listener may write W3C trace-context headers (`traceparent`) into `traceContext`: they travel in the job,
   * and the replica that runs it continues that trace.
   */
  queued: [{ task: string; executionId: string; traceContext: Record<string, string> }];
  /** A handler attempt started, or ended and how (its error's message redacted). */
  attempt: [{ task: string; executionId: string } & AttemptEvent];
  /** A handler's `ctx.service` call ended (its URL without the query string: never the key). */
  serviceCall: [{ task: string; executionId: string; attempt: number } & ResponseEvent];
  /** A report attempt failed and the report is retried. */
  reportRetry: [
    { task: string; executionId: string; attempt: number; error: { name: string; message: string } },
  ];
  /** An execution's handler attempts ended with its outcome (before the report). */
  outcome: [{ task: string; executionId: string; outcome: ExecutionOutcome }];
  /** An execution's report ended. */
  report: [{ task: string; executionId: string; result: ReportResult; attempts: number }];
  /**
   * The service refused a report for good (400, 404, 409, 410, 412...): its status, code and message. The
   * execution is dead-lettered once; the core then polls its task at once, as the service has likely queued
   * the work again (a claim that outlived its response timeout).
   */
  reportRefused: [{ task: string; executionId: string; status: number; code?: string; message: string }];
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
  redelivered: [{ task: string; executionId: string; where: 'pipeline' | 'queue' }];
  /** A record left by an earlier run (journal or queue) was taken up again. */
  replay: [{ phase: 'claimed' | 'finished' }];
  /** Records owed a report, and dead letters, in the journal (standalone) after a change. */
  journal: [{ pending: number; deadLettered: number }];
  /** A handler worker (thread or process) started, or ended and why. */
  handlerWorker: [{ started: true } | { started: false; reason: string }];
  /** This replica took or gave up the coordinator lease (clustered mode). */
  lease: [{ held: boolean; reason?: string }];
}

/** How an execution came through the cluster's queue to the replica that runs it. */
export interface ClaimOrigin {
  /** The trace context the coordinator put in the job (see the `queued` event). */
  traceContext?: Record<string, string>;
  /** When the job was added to the queue (epoch ms). */
  queuedAt?: number;
  /** The replica that claimed it (the coordinator), and the one that runs it. */
  claimedBy?: string;
  runBy?: string;
}

export class WorkerEvents extends EventEmitter<WorkerEventMap> {}

/** The scheduler's polls as core events, in both modes: each poll's result, and each poll whose answer was lost. */
export function pollEvents(events: WorkerEvents): Pick<SchedulerOptions, 'onPoll' | 'onPollAnswerLost'> {
  return {
    onPoll: (task, result, durationMs, claimed) =>
      events.emit('poll', {
        task: task.key,
        result,
        durationMs,
        ...(claimed ? { claimed: { executionId: claimed.id, createdAt: claimed.createdAt } } : {}),
      }),
    onPollAnswerLost: (task, reason) => events.emit('pollAnswerLost', { task: task.key, reason }),
  };
}
