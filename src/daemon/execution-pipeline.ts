// One claimed execution from claim to accepted report: journal the claim, run the handler, journal the
// outcome, report it, then forget it. Whatever fails, the execution ends reported, dead-lettered, or
// still in the journal for the next start: never silently dropped.
import type { Logger } from 'pino';
import type { TaskExecution } from '../api/types.ts';
import { NO_HOOKS } from '../events/hooks.ts';
import type { ClaimOrigin, WorkerEventMap } from '../events/worker-events.ts';
import type { JournalEntry, OutcomeRecord } from '../journal/journal.ts';
import { splitInput } from '../runner/input.ts';
import type { ExecutionOutcome } from '../runner/run-execution.ts';
import type { Reporter } from '../reports/reporter.ts';
import type { PolledTask } from '../scheduler/scheduler.ts';
import type { ExecutionJournal } from './execution-journal.ts';
import { failedOutcome, runToOutcome, type HandlerRunOptions } from './handler-run.ts';
import { ReportDelivery } from './report-delivery.ts';
import type { RegisteredTask } from './task-registry.ts';

export interface ExecutionPipelineOptions extends HandlerRunOptions {
  journal: ExecutionJournal;
  reporter: Reporter;
  lookup: (taskId: string) => RegisteredTask | undefined;
  /** Aborted when the daemon must exit: report retries stop, the outcome stays in the journal. */
  reportSignal: AbortSignal;
  /** Records owed a report and dead letters, told (`journal` event) after each report (standalone's journal). */
  journalCounts?: () => { pending: number; deadLettered: number };
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
  readonly #redeliveryTold = new Set<string>();
  /** Held executions whose report the service took or refused for good: only the journal is left to write. */
  readonly #settled = new Set<string>();
  /**
   * A claim of a held execution that came after its report was settled: the service handed it out anew (again
   * after its report, or queued again because the claim the report answered had lapsed), so no report in hand
   * answers it. It runs once the hold ends (the journal written).
   */
  readonly #claimedAfterReport = new Map<string, HeldClaim>();
  /**
   * The latest claim of a held execution that came before its report was settled. Taken for a redelivery (the
   * report in hand answers it) unless the service then refuses that report for good: the claim it answered had
   * lapsed, and this one may be the service's next, under the same id (its report on the way when the poll
   * answered). Then it runs too, once the hold ends; were it lapsed as well, its report is refused in turn.
   */
  readonly #claimedWhileHeld = new Map<string, HeldClaim>();

  readonly #delivery: ReportDelivery;

  constructor(options: ExecutionPipelineOptions) {
    this.#o = options;
    this.#delivery = new ReportDelivery({
      journal: options.journal,
      reporter: options.reporter,
      events: options.events,
      reportSignal: options.reportSignal,
      journalCounts: options.journalCounts,
      fence: options.fence,
    });
  }

  /**
   * Runs a freshly polled execution to its end. Never rejects. `origin`: how it came through the queue. An
   * execution still owed a report here (running, finished and not yet reported, or waiting in the journal
   * for its replay) is not run again: the service handed it out twice, and the claim in hand reports it.
   * Once the service took that report or refused it for good (the claim it answered had lapsed), a claim of the
   * execution is a new one that no report in hand answers: it runs once the journal is written.
   */
  async process(polled: PolledTask, execution: TaskExecution, origin?: ClaimOrigin): Promise<void> {
    // Only the execution's own task's handler may run it: another task's handler would report its
    // output as this job's result. No handler for it here means FAILED, naming the task.
    const registered = this.#o.lookup(execution.taskId);
    const taskKey = registered?.task.key ?? polled.key;
    const logger = this.#o.logger.child({ taskKey, executionId: execution.id });
    if (this.#settled.has(execution.id)) {
      this.#claimedAfterReport.set(execution.id, { polled, execution, origin });
      return;
    }
    if (this.#held.has(execution.id)) {
      this.#claimedWhileHeld.set(execution.id, { polled, execution, origin });
      this.#redelivered(taskKey, execution.id);
      return;
    }
    if (this.#o.journal.owes?.(execution.id) === true) {
      this.#redelivered(taskKey, execution.id);
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
    await this.#enter(
      freshClaim(taskKey, execution, origin),
      async () => {
        const outcome = await runToOutcome(this.#o, registered, execution, logger);
        await this.finish(taskKey, execution.id, outcome, logger);
      },
      () => this.#journalClaim(taskKey, execution, logger),
    );
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
    const message =
      `the service handed out this execution with an unusable answer (${problem}); ` +
      'df-worker did not run it';
    const outcome = failedOutcome('input', message);
    // Claim and outcome in one durable write: a claim record alone would be run again by a replay, with
    // the empty input that stands in for the unusable one.
    await this.#enter(
      freshClaim(polled.key, execution, origin),
      () => this.finish(polled.key, executionId, outcome, logger, { journaled: true }),
      () => this.#journalClaim(polled.key, execution, logger, outcome),
    );
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
    const claim: WorkerEventMap['claim'][0] = {
      task: entry.taskKey,
      executionId: entry.executionId,
      resumed: true,
      ...jobOf(entry.input),
      ...(origin ? { origin } : {}),
    };
    await this.#holding(entry.executionId, () => this.#enter(claim, () => this.#resume(entry, mode)));
  }

  /**
   * An execution enters the pipeline: the context it runs in is asked of the hooks, and in that context its
   * claim is journaled (`journal`, a fresh claim), told, then `work` runs: every event of the execution, and
   * each log line its listeners write, is told inside it.
   */
  #enter(
    claim: WorkerEventMap['claim'][0],
    work: () => Promise<void>,
    journal?: () => Promise<void>,
  ): Promise<void> {
    const scope = (this.#o.hooks ?? NO_HOOKS).executionScope?.(claim);
    return (scope?.run ?? runNow)(async () => {
      await journal?.();
      this.#o.events.emit('claim', claim);
      await work();
    });
  }

  /** Runs `work` with the execution held, so that a poll handing it out again meanwhile does not run it. */
  async #holding(executionId: string, work: () => Promise<void>): Promise<void> {
    this.#held.add(executionId);
    try {
      await work();
    } finally {
      this.#held.delete(executionId);
      this.#redeliveryTold.delete(executionId);
      this.#settled.delete(executionId);
      this.#claimedWhileHeld.delete(executionId);
    }
    const again = this.#claimedAfterReport.get(executionId);
    if (again) {
      this.#claimedAfterReport.delete(executionId);
      await this.process(again.polled, again.execution, again.origin);
    }
  }

  #redelivered(taskKey: string, executionId: string): void {
    const again = this.#redeliveryTold.has(executionId);
    this.#redeliveryTold.add(executionId);
    this.#o.events.emit('redelivered', { task: taskKey, executionId, where: 'pipeline', again });
  }

  async #resume(entry: JournalEntry, mode: 'rerun' | 'fail'): Promise<void> {
    const logger = this.#o.logger.child({
      taskKey: entry.taskKey,
      executionId: entry.executionId,
      replay: true,
    });
    if (entry.phase === 'finished' && entry.outcome) {
      logger.info({ status: entry.outcome.status }, 'replaying an outcome that was not yet reported');
      await this.#delivery.deliver(entry.taskKey, entry.executionId, entry.outcome, logger, {
        onSettled: (how) => this.#settle(entry.executionId, how),
        replayed: true,
      });
      return;
    }
    let outcome: ExecutionOutcome;
    if (mode === 'fail') {
      outcome = failedOutcome('aborted', 'worker restarted', {
        error: 'df-worker restarted while the handler was running; the execution was not retried',
      });
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
        outcome = failedOutcome('crashed', message, { error: message, errorName: 'PoisonExecution' });
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
        outcome = await runToOutcome(this.#o, this.#o.lookup(entry.taskId), execution, logger, prior);
      }
    }
    await this.finish(entry.taskKey, entry.executionId, outcome, logger);
  }

  async finish(
    taskKey: string,
    executionId: string,
    outcome: ExecutionOutcome,
    logger: Logger,
    options: { journaled?: boolean } = {},
  ): Promise<void> {
    this.#o.events.emit('outcome', { task: taskKey, executionId, outcome });
    if (!options.journaled) {
      try {
        await this.#o.journal.recordOutcome(executionId, this.#outcomeRecord(outcome));
      } catch (error) {
        logger.error({ err: error as Error }, 'could not journal the outcome; reporting it anyway');
      }
    }
    await this.#delivery.deliver(taskKey, executionId, outcome, logger, {
      onSettled: (how) => this.#settle(executionId, how),
    });
  }

  /** The service took the report or refused it for good: a claim from now on is a new one (see the fields). */
  #settle(executionId: string, how: 'delivered' | 'refused'): void {
    this.#settled.add(executionId);
    const during = this.#claimedWhileHeld.get(executionId);
    if (how === 'refused' && during) this.#claimedAfterReport.set(executionId, during);
  }
}

interface HeldClaim {
  polled: PolledTask;
  execution: TaskExecution;
  origin: ClaimOrigin | undefined;
}

const runNow = <T>(fn: () => T): T => fn();

/** The `claim` event of an execution a poll (or the queue) brought. */
function freshClaim(
  task: string,
  execution: TaskExecution,
  origin?: ClaimOrigin,
): WorkerEventMap['claim'][0] {
  return {
    task,
    executionId: execution.id,
    createdAt: execution.createdAt,
    resumed: false,
    ...jobOf(execution.input),
    ...(origin ? { origin } : {}),
  };
}

/** The claim event's `jobId`: the service's `input.context.jobId`, when it is a string. */
function jobOf(input: unknown): { jobId?: string } {
  const jobId = splitInput(input).job.jobId;
  return typeof jobId === 'string' ? { jobId } : {};
}
