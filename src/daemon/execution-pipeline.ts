// One claimed execution from claim to accepted report: journal the claim, run the handler, journal the
// outcome, report it, then forget it. Whatever fails, the execution ends reported, dead-lettered, or
// still in the journal for the next start: never silently dropped.
import type { Logger } from 'pino';
import { withFailureMessage } from '../runner/failure-output.ts';
import type { TaskExecution } from '../api/types.ts';
import type { Clock } from '../clock/clock.ts';
import type { Journal, JournalEntry, OutcomeRecord } from '../journal/journal.ts';
import type { ResponseEvent, ServiceClient } from '../api/client.ts';
import type { AttemptHost } from '../runner/attempt-host.ts';
import { truncateMessage } from '../runner/errors.ts';
import type { Redact } from '../secrets/redact.ts';
import { runExecution, type AttemptEvent, type ExecutionOutcome } from '../runner/run-execution.ts';
import type { Reporter } from '../reports/reporter.ts';
import type { PolledTask } from '../scheduler/scheduler.ts';
import type { TraceSlot } from '../tracing/trace-slot.ts';
import type { ClaimOrigin } from './events.ts';
import type { RegisteredTask } from './task-registry.ts';

export interface PipelineObserver {
  /** Fresh claim; what it returns may wrap the rest of the execution (its trace context). */
  claimed?(taskKey: string, execution: TaskExecution, origin?: ClaimOrigin): TraceSlot | void;
  /** A journal record left by an earlier run is taken up again (it is in flight until reported). */
  resumed?(
    taskKey: string,
    entry: Pick<JournalEntry, 'executionId' | 'input'>,
    origin?: ClaimOrigin,
  ): TraceSlot | void;
  /** A handler attempt started or ended. */
  attempt?(taskKey: string, executionId: string, event: AttemptEvent): void;
  /** A request of a handler's `ctx.service`; only when set are the handlers' requests observed. */
  serviceCall?(taskKey: string, executionId: string, attempt: number, event: ResponseEvent): void;
  /** A report attempt failed; the report is retried. */
  reportRetry?(taskKey: string, executionId: string, attempt: number, error: unknown): void;
  finished?(taskKey: string, executionId: string, outcome: ExecutionOutcome): void;
  reported?(
    taskKey: string,
    executionId: string,
    result: 'delivered' | 'dead-lettered' | 'left-in-journal',
    attempts: number,
  ): void;
  /** The report was dropped: this process no longer owns the execution (see `fence`). */
  fenced?(taskKey: string, executionId: string): void;
  /**
   * The service refused the report for good (its first answer, before any FAILED fallback); the execution goes
   * to the dead letters once, and is never reported again.
   */
  refused?(taskKey: string, executionId: string, answer: ReportRefusal): void;
  /**
   * A poll handed out an execution this process still owes a report for (running, or finished and not yet
   * reported): it was not run again.
   */
  redelivered?(taskKey: string, executionId: string): void;
}

/** The service's answer to a report it refused for good, as the dead letter keeps it. */
export type ReportRefusal = { status: number; code?: string; message: string };

/**
 * Where claims and outcomes are kept until reported: the state folder's journal (standalone), or the cluster's
 * queue (clustered mode, src/clustered/queue-journal.ts).
 */
export type ExecutionJournal = Pick<
  Journal,
  'recordClaim' | 'recordStart' | 'recordOutcome' | 'recordReportAttempt' | 'complete' | 'deadLetter'
> &
  Partial<Pick<Journal, 'owes'>>;

export interface ExecutionPipelineOptions {
  journal: ExecutionJournal;
  reporter: Reporter;
  clock: Clock;
  logger: Logger;
  defaultTimeoutMs: number;
  /** Back-off between handler attempts. */
  backoff?: { baseMs: number; maxMs: number };
  /** Where handler attempts run (DF_HANDLER_ISOLATION). Default: inline. */
  host?: AttemptHost;
  /** The client behind handlers' `ctx.service`: the daemon's key and budget, in its 'handler' class. */
  service?: ServiceClient;
  /** Cleans the daemon's secrets out of what handlers return, throw and log. */
  redact?: Redact;
  /** Runs of one execution that may die with the daemon or its worker before it is failed as poison. */
  maxCrashesPerExecution?: number;
  lookup: (taskId: string) => RegisteredTask | undefined;
  /** Aborted when the shutdown grace period ends: running handlers are stopped and reported FAILED. */
  handlerSignal: AbortSignal;
  /** Aborted when the daemon must exit: report retries stop, the outcome stays in the journal. */
  reportSignal: AbortSignal;
  observer?: PipelineObserver;
  /**
   * Asked before each report attempt leaves: true while this process still owns the execution (clustered mode:
   * it still holds the job's lock, which the check extends). False drops the outcome unreported, for the owner
   * that took the execution over to report. Default: always owned (standalone).
   */
  fence?: (executionId: string) => Promise<boolean>;
}

export class ExecutionPipeline {
  readonly #o: ExecutionPipelineOptions;
  /** Executions taken in (claimed or resumed) and not yet out (reported, dead-lettered or left). */
  readonly #held = new Set<string>();
  /** Held executions already logged as handed out again: one line per claim, however many polls repeat it. */
  readonly #redeliveryLogged = new Set<string>();

  constructor(options: ExecutionPipelineOptions) {
    this.#o = options;
  }

  /**
   * Runs a freshly polled execution to its end. Never rejects. `origin`: how it came through the queue. An
   * execution still owed a report here (running, finished and not yet reported, or waiting in the journal
   * for its replay) is not run again: the service handed it out twice, and the claim in hand reports it.
   */
  async process(polled: PolledTask, execution: TaskExecution, origin?: ClaimOrigin): Promise<void> {
    // Only the execution's own task's handler may run it: another task's handler would report its
    // output as this job's result. No handler for it here means FAILED, naming the task.
    const registered = this.#o.lookup(execution.taskId);
    const taskKey = registered?.task.key ?? polled.key;
    const logger = this.#o.logger.child({ taskKey, executionId: execution.id });
    if (this.#held.has(execution.id) || this.#o.journal.owes?.(execution.id) === true) {
      this.#redelivered(taskKey, execution.id, logger);
      return;
    }
    await this.#holding(execution.id, () => this.#process(polled, execution, registered, logger, origin));
  }

  async #process(
    polled: PolledTask,
    execution: TaskExecution,
    registered: RegisteredTask | undefined,
    logger: Logger,
    origin: ClaimOrigin | undefined,
  ): Promise<void> {
    const taskKey = registered?.task.key ?? polled.key;
    if (execution.taskId !== polled.taskId) {
      logger.warn(
        { polledTaskId: polled.taskId, taskId: execution.taskId },
        'poll answered an execution of another task',
      );
    }
    const trace = this.#o.observer?.claimed?.(taskKey, execution, origin);
    await (trace?.run ?? runNow)(async () => {
      await this.#journalClaim(taskKey, execution, logger);
      logger.info('execution claimed');
      const outcome = await this.#run(registered, execution, logger);
      await this.finish(taskKey, execution.id, outcome, logger);
    });
  }

  /**
   * Reports FAILED an execution a poll claimed whose answer cannot be run (see Scheduler's
   * failUnreadable), journaled like any claim so a crash before the report still reports it. Never rejects.
   */
  async failUnreadable(
    polled: PolledTask,
    executionId: string,
    problem: string,
    origin?: ClaimOrigin,
  ): Promise<void> {
    const logger = this.#o.logger.child({ taskKey: polled.key, executionId });
    const execution: TaskExecution = {
      object: 'task_execution',
      id: executionId,
      taskId: polled.taskId,
      createdAt: '',
      status: 'IN_PROGRESS',
      input: {},
    };
    const trace = this.#o.observer?.claimed?.(polled.key, execution, origin);
    const message =
      `the service handed out this execution with an unusable answer (${problem}); ` +
      'df-worker did not run it';
    const outcome: ExecutionOutcome = {
      status: 'FAILED',
      output: { error: message },
      attempts: 0,
      durationMs: 0,
      failure: { kind: 'input', message },
    };
    // Claim and outcome in one durable write: a claim record alone would be run again by a replay, with
    // the empty input that stands in for the unusable one.
    await (trace?.run ?? runNow)(async () => {
      await this.#journalClaim(polled.key, execution, logger, outcome);
      await this.finish(polled.key, executionId, outcome, logger, { journaled: true });
    });
  }

  async #journalClaim(
    taskKey: string,
    execution: TaskExecution,
    logger: Logger,
    outcome?: ExecutionOutcome,
  ): Promise<void> {
    try {
      await this.#o.journal.recordClaim(
        {
          executionId: execution.id,
          taskId: execution.taskId,
          taskKey,
          input: execution.input,
          ...(execution.createdAt ? { createdAt: execution.createdAt } : {}),
          claimedAt: new Date(this.#o.clock.now()).toISOString(),
        },
        outcome && this.#outcomeRecord(outcome),
      );
    } catch (error) {
      // The claim is already ours on the service: run it anyway; the journal gate stops new claims.
      logger.error(
        { err: error as Error },
        'could not journal the claim; running it without a crash guarantee',
      );
    }
  }

  #outcomeRecord(outcome: ExecutionOutcome): OutcomeRecord {
    return {
      status: outcome.status,
      output: outcome.output,
      attempts: outcome.attempts,
      finishedAt: new Date(this.#o.clock.now()).toISOString(),
    };
  }

  /** Replays a journal record left by an earlier run (see Worker.replay). */
  async resume(entry: JournalEntry, mode: 'rerun' | 'fail', origin?: ClaimOrigin): Promise<void> {
    const trace = this.#o.observer?.resumed?.(entry.taskKey, entry, origin);
    await this.#holding(entry.executionId, () => (trace?.run ?? runNow)(() => this.#resume(entry, mode)));
  }

  /** Runs `work` with the execution held, so that a poll handing it out again meanwhile does not run it. */
  async #holding(executionId: string, work: () => Promise<void>): Promise<void> {
    this.#held.add(executionId);
    try {
      await work();
    } finally {
      this.#held.delete(executionId);
      this.#redeliveryLogged.delete(executionId);
    }
  }

  #redelivered(taskKey: string, executionId: string, logger: Logger): void {
    this.#o.observer?.redelivered?.(taskKey, executionId);
    if (this.#redeliveryLogged.has(executionId)) return;
    this.#redeliveryLogged.add(executionId);
    logger.warn(
      'a poll handed out again an execution this worker still owes a report for (the service re-queued it): ' +
        'it is not run again; the claim in hand reports it once',
    );
  }

  async #resume(entry: JournalEntry, mode: 'rerun' | 'fail'): Promise<void> {
    const logger = this.#o.logger.child({
      taskKey: entry.taskKey,
      executionId: entry.executionId,
      replay: true,
    });
    if (entry.phase === 'finished' && entry.outcome) {
      logger.info({ status: entry.outcome.status }, 'replaying an outcome that was not yet reported');
      await this.#deliver(entry.taskKey, entry.executionId, entry.outcome, logger);
      return;
    }
    let outcome: ExecutionOutcome;
    if (mode === 'fail') {
      outcome = {
        status: 'FAILED',
        output: { error: 'df-worker restarted while the handler was running; the execution was not retried' },
        attempts: 0,
        durationMs: 0,
        failure: { kind: 'aborted', message: 'worker restarted' },
      };
      logger.warn(
        'execution was running when the worker stopped; reporting it FAILED (DF_JOURNAL_REPLAY=fail)',
      );
    } else {
      // Every start this record counts ended with the daemon dying: the poison execution guard.
      const prior = entry.starts ?? 1;
      const limit = this.#o.maxCrashesPerExecution ?? Infinity;
      if (prior >= limit) {
        const message =
          `df-worker died ${prior} times while running this execution (the handler may crash it: out of ` +
          `memory, process.exit, a native fault); it is not run again (DF_MAX_CRASHES_PER_EXECUTION=${limit})`;
        logger.error({ starts: prior }, 'poison execution: reporting it FAILED without running it again');
        outcome = {
          status: 'FAILED',
          output: { error: message, errorName: 'PoisonExecution' },
          attempts: 0,
          durationMs: 0,
          failure: { kind: 'crashed', message },
        };
      } else {
        logger.warn({ starts: prior }, 'execution was running when the worker stopped; running it again');
        try {
          await this.#o.journal.recordStart(entry.executionId);
        } catch (error) {
          logger.error(
            { err: error as Error },
            'could not count the start in the journal; running it anyway',
          );
        }
        const execution: TaskExecution = {
          object: 'task_execution',
          id: entry.executionId,
          taskId: entry.taskId,
          createdAt: entry.createdAt ?? entry.claimedAt,
          status: 'IN_PROGRESS',
          input: entry.input,
        };
        outcome = await this.#run(this.#o.lookup(entry.taskId), execution, logger, prior);
      }
    }
    await this.finish(entry.taskKey, entry.executionId, outcome, logger);
  }

  /** The handler's outcome; whatever goes wrong on the way is a FAILED outcome, never a rejection. */
  async #run(
    registered: RegisteredTask | undefined,
    execution: TaskExecution,
    logger: Logger,
    priorCrashes = 0,
  ): Promise<ExecutionOutcome> {
    try {
      return await this.#runHandler(registered, execution, logger, priorCrashes);
    } catch (error) {
      // runExecution settles every handler failure itself; reaching here is a df-worker bug, and the
      // execution must still be reported.
      const message = `df-worker failed while running the handler: ${describeInternalError(error)}`;
      logger.error({ err: error as Error }, 'internal error while running an execution; reporting it FAILED');
      return {
        status: 'FAILED',
        output: { error: message },
        attempts: 0,
        durationMs: 0,
        failure: { kind: 'handler', message },
      };
    }
  }

  async #runHandler(
    registered: RegisteredTask | undefined,
    execution: TaskExecution,
    logger: Logger,
    priorCrashes: number,
  ): Promise<ExecutionOutcome> {
    if (!registered) {
      logger.error({ taskId: execution.taskId }, 'no handler serves this task; reporting it FAILED');
      return {
        status: 'FAILED',
        output: { error: `no handler in this df-worker serves task ${execution.taskId}` },
        attempts: 0,
        durationMs: 0,
        failure: { kind: 'handler', message: 'no handler' },
      } satisfies ExecutionOutcome;
    }
    const outcome = await runExecution({
      handler: registered.handler,
      task: registered.task,
      execution,
      clock: this.#o.clock,
      // The runner binds taskKey, executionId and attempt itself.
      logger: this.#o.logger,
      shutdownSignal: this.#o.handlerSignal,
      defaultTimeoutMs: this.#o.defaultTimeoutMs,
      ...(this.#o.backoff ? { backoff: this.#o.backoff } : {}),
      ...(this.#o.host ? { host: this.#o.host } : {}),
      ...(this.#o.service ? { service: this.#o.service } : {}),
      ...(this.#o.redact ? { redact: this.#o.redact } : {}),
      ...(this.#o.maxCrashesPerExecution === undefined
        ? {}
        : { crashes: { limit: this.#o.maxCrashesPerExecution, prior: priorCrashes } }),
      onAttempt: (event) => this.#o.observer?.attempt?.(registered.task.key, execution.id, event),
      ...(this.#o.observer?.serviceCall
        ? {
            onServiceCall: (attempt: number, event: ResponseEvent) =>
              this.#o.observer?.serviceCall?.(registered.task.key, execution.id, attempt, event),
          }
        : {}),
    });
    return outcome;
  }

  async finish(
    taskKey: string,
    executionId: string,
    outcome: ExecutionOutcome,
    logger: Logger,
    options: { journaled?: boolean } = {},
  ): Promise<void> {
    this.#o.observer?.finished?.(taskKey, executionId, outcome);
    logger.info(
      {
        status: outcome.status,
        attempts: outcome.attempts,
        durationMs: outcome.durationMs,
        failure: outcome.failure,
      },
      'execution finished',
    );
    if (!options.journaled) {
      try {
        await this.#o.journal.recordOutcome(executionId, this.#outcomeRecord(outcome));
      } catch (error) {
        logger.error({ err: error as Error }, 'could not journal the outcome; reporting it anyway');
      }
    }
    await this.#deliver(taskKey, executionId, outcome, logger);
  }

  async #deliver(
    taskKey: string,
    executionId: string,
    outcome: { status: ExecutionOutcome['status']; output: ExecutionOutcome['output'] },
    logger: Logger,
  ): Promise<void> {
    // Outcomes built here (no handler, a restart, a poison execution...) and replayed ones carry `message` too.
    if (outcome.status === 'FAILED') outcome = { ...outcome, output: withFailureMessage(outcome.output) };
    const { journal, reporter } = this.#o;
    const fence = this.#o.fence;
    const report = (status: ExecutionOutcome['status'], output: ExecutionOutcome['output']) =>
      reporter.report(executionId, { status, output }, this.#o.reportSignal, {
        ...(fence ? { mayReport: () => this.#owned(fence, executionId, logger) } : {}),
        // Counted only when an attempt failed: `df-worker journal` shows reports that are stuck, and the
        // happy path costs no extra write.
        onRetry: (attempt, error) => {
          this.#o.observer?.reportRetry?.(taskKey, executionId, attempt, error);
          return journal.recordReportAttempt(executionId).catch((error: unknown) => {
            logger.warn({ err: error as Error }, 'could not count the report attempt in the journal');
          });
        },
      });
    const result = await report(outcome.status, outcome.output);
    try {
      if ('fenced' in result) {
        this.#fenced(taskKey, executionId, logger);
      } else if (result.delivered) {
        await journal.complete(executionId);
        logger.info({ status: outcome.status, reportAttempts: result.attempts }, 'execution reported');
        this.#o.observer?.reported?.(taskKey, executionId, 'delivered', result.attempts);
      } else if ('refused' in result) {
        this.#o.observer?.refused?.(taskKey, executionId, result.refused);
        let refused = result.refused;
        if (outcome.status === 'COMPLETED' && OUTPUT_REFUSED.has(refused.status)) {
          // The service will not take this output (too large, or invalid to it): tell the job FAILED so it
          // does not wait forever. The refused output stays in the dead letter for an operator.
          const message = truncateMessage(
            `the service refused the handler's output (${refused.status}): ${refused.message}`,
          );
          logger.error({ refusedStatus: refused.status }, 'output refused; reporting the execution FAILED');
          const fallback = await report('FAILED', { error: message, message, refusedStatus: refused.status });
          if ('fenced' in fallback) {
            this.#fenced(taskKey, executionId, logger);
            return;
          }
          if ('interrupted' in fallback) {
            logger.warn('report not delivered before exit; it stays in the journal for the next start');
            this.#o.observer?.reported?.(taskKey, executionId, 'left-in-journal', result.attempts);
            return;
          }
          refused = {
            ...refused,
            message: fallback.delivered
              ? `${refused.message}; df-worker reported the execution FAILED instead`
              : `${refused.message}; reporting it FAILED instead was refused too: ${fallback.refused.message}`,
          };
        }
        await journal.deadLetter(executionId, refused);
        this.#o.observer?.reported?.(taskKey, executionId, 'dead-lettered', result.attempts);
      } else {
        logger.warn('report not delivered before exit; it stays in the journal for the next start');
        this.#o.observer?.reported?.(taskKey, executionId, 'left-in-journal', result.attempts);
      }
    } catch (error) {
      logger.error({ err: error as Error }, 'could not update the journal after reporting');
    }
  }

  /** The fence's answer; a fence that fails cannot prove ownership, so the report is dropped. */
  async #owned(
    fence: (executionId: string) => Promise<boolean>,
    executionId: string,
    logger: Logger,
  ): Promise<boolean> {
    try {
      return await fence(executionId);
    } catch (error) {
      logger.warn({ err: error as Error }, 'could not check that this process still owns the execution');
      return false;
    }
  }

  #fenced(taskKey: string, executionId: string, logger: Logger): void {
    logger.warn(
      'this process no longer owns the execution (its lock lapsed during a stall or a partition): dropping ' +
        'its outcome unreported; the replica that took it over reports it',
    );
    this.#o.observer?.fenced?.(taskKey, executionId);
  }
}

const runNow = <T>(fn: () => T): T => fn();

/** Answers to a COMPLETED report that refuse its output itself: a FAILED report may still get through. */
const OUTPUT_REFUSED: ReadonlySet<number> = new Set([400, 413, 422]);

function describeInternalError(error: unknown): string {
  try {
    return error instanceof Error ? error.message : String(error);
  } catch {
    return 'an unknown error';
  }
}
