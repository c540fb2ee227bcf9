// The poll loop: picks the task the planner says is due, polls it within budget only when a handler slot
// is free (so nothing is claimed that cannot start at once), and hands each claimed execution off.
import type { Logger } from 'pino';
import type { ServiceClient } from '../api/client.ts';
import { NetworkError, ResponseValidationError, TimeoutError } from '../api/errors.ts';
import { topLevelString } from '../api/json-prefix.ts';
import type { TaskExecution } from '../api/types.ts';
import { monotonicAt, type Clock } from '../clock/clock.ts';
import type { PollPlanner } from './poll-planner.ts';
import { classifyFailure } from './retry-policy.ts';
import { mayTakeSlot } from './slot-share.ts';
import { jobIdOf } from './successor-pacing.ts';

export interface PolledTask {
  taskId: string;
  key: string;
}

export type PollResult = 'hit' | 'empty' | 'error';

/**
 * Why a poll's answer could not be used, so that the execution it may have claimed is nobody's: cut short by a
 * time limit or the connection, still unanswered when the shutdown ended, or a 2xx that is not JSON or names no
 * execution. (A readable answer with an id is not lost: its execution is reported FAILED.)
 */
export const POLL_ANSWER_LOSSES = ['timeout', 'connection', 'shutdown', 'not-json', 'no-id'] as const;
export type PollAnswerLoss = (typeof POLL_ANSWER_LOSSES)[number];

export interface SchedulerOptions {
  /** The client, whose budget gate paces every poll and pauses them all after a 429. */
  client: ServiceClient;
  planner: PollPlanner;
  clock: Clock;
  logger: Logger;
  /**
   * Executions run at once. A poll in flight holds a slot too (its answer may be an execution to run), so
   * polls of different tasks go out side by side, each on its own connection, and one slow answer holds back
   * only its own task.
   */
  concurrency: number;
  /**
   * A task's own limit on the slots it holds (defineTask `concurrency`), or undefined for none: a task at its
   * limit is not polled until one of its executions ends. Default: none for every task.
   */
  taskConcurrency?: (task: PolledTask) => number | undefined;
  /**
   * Keeps the last free slot from a task that holds its fair share while other tasks are served (see
   * slot-share.ts), so a flood of one task cannot hold every slot. Default true; false restores the shared
   * pool of before (bench:fairness's baseline).
   */
  fairShare?: boolean;
  /**
   * Where the slots are counted when they are not this loop's own (clustered mode: the executions queued or
   * running in Redis, as of the coordinator's last look), for taskConcurrency and the fair share. Default:
   * this loop's executions and polls, against `concurrency`.
   */
  slotView?: () => SlotView;
  /**
   * A task was left unpolled for want of a slot it may take (see slotView): whoever keeps the view looks
   * again and calls recheck(). Called on each such decision.
   */
  onHeldBack?: () => void;
  /**
   * Aborts the polls already sent, whose answers are then lost (counted, reason `shutdown`): the daemon's last
   * word at shutdown, when waiting longer for an answer would overrun the documented bound. Until then a sent
   * poll runs to its answer or DF_API_ANSWER_TIMEOUT_MS, since the service claims the execution when it answers.
   */
  cutPolls?: AbortSignal;
  /** While the key is refused (401), one poll is tried this often, in ms. */
  unauthorizedRetryMs: number;
  /** Why no execution may be claimed right now (e.g. the journal is not writable), or undefined. */
  claimBlocker?: () => string | undefined;
  /** Runs one claimed execution to its end (journal, handler, report). Must not reject. */
  dispatch: (task: PolledTask, execution: TaskExecution) => Promise<void>;
  /**
   * Reports FAILED an execution a poll claimed whose answer cannot be run (e.g. `input` not an object),
   * so its job does not wait forever. Must not reject. Without it, such an answer is only logged.
   */
  failUnreadable?: (task: PolledTask, executionId: string, problem: string) => Promise<void>;
  onPoll?: (task: PolledTask, result: PollResult, durationMs: number, claimed?: TaskExecution) => void;
  /**
   * A poll was sent but its answer was lost (connection closed, a timeout, a 2xx body cut short): the service
   * may have claimed an execution for this worker that no one will run or report. Called after it is logged.
   */
  onPollAnswerLost?: (task: PolledTask, reason: PollAnswerLoss) => void;
  onAuthorizationChange?: (authorized: boolean) => void;
  /**
   * Called whenever the count of executions owed a report changes: those running (or being reported) and
   * those waiting for a slot. The budget's report reserve follows it (see reportReserveFor).
   */
  onReportsOwed?: (owed: number) => void;
}

/** Slots counted elsewhere (see SchedulerOptions.slotView). */
export interface SlotView {
  busy: number;
  concurrency: number;
  held(taskId: string): number;
}

export class Scheduler {
  readonly #o: SchedulerOptions;
  readonly #running = new Set<Promise<void>>();
  /** Polls out (waiting for the budget or for their answer), by task id: at most one per task. */
  readonly #polling = new Map<string, Promise<void>>();
  /** Work waiting for a free slot (a journal replay), started before any poll. */
  readonly #backlog: Array<{ work: () => Promise<void>; taskId: string | undefined }> = [];
  /** Executions running, by task id (polled ones, and journal replays that name their task). */
  readonly #runningByTask = new Map<string, number>();
  #nudge = new AbortController();
  #unauthorized = false;
  #blockedReason: string | undefined;

  constructor(options: SchedulerOptions) {
    this.#o = options;
  }

  get inFlight(): number {
    return this.#running.size;
  }

  /**
   * Executions owed a report: running (or being reported), waiting for a slot, or claimed by a poll out beyond
   * the first (reportReserveFor already keeps room for the claim of one poll, as when polls went one at a time).
   */
  get reportsOwed(): number {
    return this.#running.size + this.#backlog.length + Math.max(0, this.#polling.size - 1);
  }

  /** Slots taken: executions running and polls out. */
  get #busy(): number {
    return this.#running.size + this.#polling.size;
  }

  get authorized(): boolean {
    return !this.#unauthorized;
  }

  /** The slots changed where slotView counts them: which task may be polled is decided again. */
  recheck(): void {
    this.#nudge.abort();
  }

  /**
   * Polls the given task (or all) as soon as budget and a free slot allow. Returns how many tasks matched.
   * While the key is refused, the next poll keeps its back-off step: a wake would spend a request on a 401.
   */
  wake(taskKey?: string): number {
    if (this.#unauthorized)
      return this.#o.planner.tasks.filter((t) => taskKey === undefined || t.key === taskKey).length;
    const woken = this.#o.planner.wake(this.#o.clock.monotonic(), taskKey);
    this.#nudge.abort();
    return woken;
  }

  /** Another key is in use (DF_API_KEY_FILE changed): while the last was refused, one poll tries it now. */
  keyChanged(): void {
    if (!this.#unauthorized) return;
    const first = this.#o.planner.tasks[0];
    if (first) this.#o.planner.wake(this.#o.clock.monotonic(), first.key);
    this.#nudge.abort();
  }

  /**
   * Runs `work` (an execution owed from before, such as a journal replay) in the next free slot, ahead of
   * polls: it counts against the concurrency like a polled execution, and polling goes on in the other slots.
   * With `task`, it counts against that task's own limit too, and waits while the task is at it. `work` must not
   * reject. Work still waiting when the loop stops is started by `drained()`.
   */
  enqueue(work: () => Promise<void>, task?: PolledTask): void {
    this.#backlog.push({ work, taskId: task?.taskId });
    this.#o.onReportsOwed?.(this.reportsOwed);
    this.#nudge.abort();
  }

  /**
   * Resolves once every dispatched and enqueued execution has ended (reported, or left in the journal) and every
   * poll out has its answer (and what it claimed has ended too).
   */
  async drained(): Promise<void> {
    for (;;) {
      for (let owed = this.#nextOwed(); owed && this.#busy < this.#o.concurrency; owed = this.#nextOwed()) {
        this.#track(owed.work(), owed.taskId);
      }
      if (this.#busy === 0) return;
      await Promise.race([...this.#running, ...this.#polling.values()].map((p) => p.catch(() => undefined)));
    }
  }

  /** Loops until `signal` aborts; does not wait for executions already dispatched (see `drained`). */
  async run(signal: AbortSignal): Promise<void> {
    const { planner, clock, logger } = this.#o;
    signal.addEventListener('abort', () => this.#nudge.abort(), { once: true });
    while (!signal.aborted) {
      if (this.#busy >= this.#o.concurrency) {
        await this.#waitForNudge(Infinity);
        continue;
      }
      const owed = this.#nextOwed();
      if (owed) {
        this.#track(owed.work(), owed.taskId);
        continue;
      }
      const blocked = this.#o.claimBlocker?.();
      if (blocked !== this.#blockedReason) {
        if (blocked) logger.error({ reason: blocked }, 'not claiming executions');
        else logger.info('claiming executions again');
        this.#blockedReason = blocked;
      }
      if (blocked) {
        await this.#waitForNudge(5_000);
        continue;
      }
      // A task whose poll is out is not due again until its answer says when; a task whose slots are full
      // (its own concurrency, or its fair share of the last free slot) waits for one of its executions to end.
      const task = planner.next(this.#notPollable());
      const now = clock.monotonic();
      if (!task) {
        await this.#waitForNudge(60_000);
        continue;
      }
      if (task.nextDueAt > now) {
        await this.#waitForNudge(task.nextDueAt - now);
        continue;
      }
      this.#startPoll({ taskId: task.taskId, key: task.key }, signal);
    }
  }

  #startPoll(task: PolledTask, signal: AbortSignal): void {
    const polling = this.#pollOnce(task, signal)
      .catch((error: unknown) => {
        this.#o.logger.error({ taskKey: task.key, err: error as Error }, 'poll failed unexpectedly');
      })
      .finally(() => {
        this.#polling.delete(task.taskId);
        this.#o.onReportsOwed?.(this.reportsOwed);
        this.#nudge.abort();
      });
    this.#polling.set(task.taskId, polling);
    this.#o.onReportsOwed?.(this.reportsOwed);
  }

  async #pollOnce(task: PolledTask, signal: AbortSignal): Promise<void> {
    const { client, planner, clock, logger } = this.#o;
    const started = clock.monotonic();
    planner.sending(task.taskId);
    let execution: TaskExecution | null;
    try {
      execution = await client.pollTask(task.taskId, signal, this.#o.cutPolls);
    } catch (error) {
      const cut = this.#o.cutPolls;
      if (cut?.aborted === true && error === cut.reason) {
        // Sent before the stop (a poll still waiting for the budget was cancelled by it) and unanswered since.
        this.#pollAnswerLost(task, started, clock.monotonic(), 'shutdown', error);
        return;
      }
      if (signal.aborted && !(error instanceof NetworkError || error instanceof ResponseValidationError))
        return;
      const now = clock.monotonic();
      this.#o.onPoll?.(task, 'error', now - started);
      const action = classifyFailure(error);
      if (error instanceof ResponseValidationError) {
        const { executionId } = error;
        const failUnreadable = this.#o.failUnreadable;
        if (executionId !== undefined && failUnreadable) {
          logger.error(
            { taskKey: task.key, taskId: task.taskId, executionId, err: error },
            'poll answer unusable; reporting the execution FAILED so its job does not wait for it',
          );
          this.#track(failUnreadable(task, executionId, error.problem), task.taskId);
        } else {
          this.#pollAnswerLost(task, started, now, error.field === '(body)' ? 'not-json' : 'no-id', error);
        }
        planner.onError(task.taskId, now);
      } else if (error instanceof NetworkError && error.mayHaveBeenApplied) {
        const recovered = await this.#readBackCutClaim(task, error);
        if (recovered) {
          planner.onHit(task.taskId, clock.monotonic(), this.#arrivedAt(recovered), jobIdOf(recovered));
          this.#track(this.#o.dispatch(task, recovered), task.taskId);
          return;
        }
        planner.onError(task.taskId, now);
        this.#pollAnswerLost(
          task,
          started,
          now,
          error instanceof TimeoutError ? 'timeout' : 'connection',
          error,
        );
      } else if (action.kind === 'rate-limited') {
        // The task stays due: its next poll waits in the budget gate, which paused every request.
      } else if (action.kind === 'unauthorized') {
        this.#setAuthorized(false, error);
        planner.postpone(task.taskId, now + this.#o.unauthorizedRetryMs);
        for (const t of planner.tasks) planner.postpone(t.taskId, now + this.#o.unauthorizedRetryMs);
      } else {
        logger.warn({ taskKey: task.key, err: error as Error }, 'poll failed; backing off');
        planner.onError(task.taskId, now);
      }
      return;
    }
    const now = clock.monotonic();
    this.#setAuthorized(true);
    if (!execution) {
      this.#o.onPoll?.(task, 'empty', now - started);
      planner.onEmpty(task.taskId, now);
      return;
    }
    this.#o.onPoll?.(task, 'hit', now - started, execution);
    planner.onHit(task.taskId, now, this.#arrivedAt(execution), jobIdOf(execution));
    this.#track(this.#o.dispatch(task, execution), task.taskId);
  }

  /**
   * Where the execution's createdAt falls on the local monotonic clock, through the service's clock as its
   * answers' Date headers tell it: the local wall clock may be minutes off the service's. Only when no answer
   * carried a Date (an in-process emulator) is it read against the local wall clock.
   */
  #arrivedAt(execution: TaskExecution): number | undefined {
    const createdAt = Date.parse(execution.createdAt);
    if (!Number.isFinite(createdAt)) return undefined;
    const { client, clock } = this.#o;
    return (
      client.serviceClock.monotonicAt(createdAt) ?? Math.min(clock.monotonic(), monotonicAt(clock, createdAt))
    );
  }

  /**
   * A poll answer cut short may have named its execution before it was cut: read it back by id, and it is
   * run as if the answer had come whole. Undefined when the answer named none, the read fails, or the
   * execution is no longer this task's to run.
   */
  async #readBackCutClaim(task: PolledTask, error: NetworkError): Promise<TaskExecution | undefined> {
    const prefix = error.answerPrefix;
    const id = prefix === undefined ? undefined : topLevelString(prefix, 'id');
    if (id === undefined) return undefined;
    const logger = this.#o.logger.child({ taskKey: task.key, taskId: task.taskId, executionId: id });
    try {
      const execution = await this.#o.client.getExecution(id, this.#o.cutPolls);
      if (execution.status !== 'IN_PROGRESS' || execution.taskId !== task.taskId) {
        logger.warn(
          { status: execution.status, executionTaskId: execution.taskId },
          'a poll answer cut short named an execution that is not ours to run; leaving it',
        );
        return undefined;
      }
      logger.warn({ err: error }, 'poll answer cut short; its execution was read back by id and runs');
      return execution;
    } catch (readError) {
      logger.error(
        { err: readError as Error },
        'a poll answer cut short named an execution that could not be read back',
      );
      return undefined;
    }
  }

  #pollAnswerLost(
    task: PolledTask,
    started: number,
    now: number,
    reason: PollAnswerLoss,
    error: unknown,
  ): void {
    // Nothing else will name this execution: this worker never learnt its id, and the service API documents no
    // way back from claimed to pending. An operator can find it on the service by task and time.
    this.#o.logger.error(
      {
        taskKey: task.key,
        taskId: task.taskId,
        reason,
        polledAt: new Date(started).toISOString(),
        lostAt: new Date(now).toISOString(),
        answerStatus: error instanceof NetworkError ? error.answerStatus : undefined,
        err: error as Error,
      },
      'poll answer lost after the poll was sent: the service may hold an execution of this task claimed by ' +
        'this worker between polledAt and lostAt that no one will run or report; look for it on the service',
    );
    this.#o.onPollAnswerLost?.(task, reason);
  }

  /** Takes the first owed work whose task (if it names one) is below its own limit. */
  #nextOwed(): { work: () => Promise<void>; taskId: string | undefined } | undefined {
    const index = this.#backlog.findIndex(({ taskId }) => {
      if (taskId === undefined) return true;
      const task = this.#o.planner.tasks.find((t) => t.taskId === taskId);
      const limit = task && this.#o.taskConcurrency?.({ taskId, key: task.key });
      return limit === undefined || (this.#runningByTask.get(taskId) ?? 0) < limit;
    });
    return index < 0 ? undefined : this.#backlog.splice(index, 1)[0];
  }

  /** Task ids not to poll now: a poll out, or no slot they may take (slot-share.ts). */
  #notPollable(): Set<string> {
    const planned = this.#o.planner.tasks;
    const excluded = new Set(this.#polling.keys());
    const view = this.#o.slotView?.();
    let heldBack = false;
    for (const { taskId, key } of planned) {
      if (excluded.has(taskId)) continue;
      const may = mayTakeSlot({
        busy: view ? view.busy : this.#busy,
        concurrency: view ? view.concurrency : this.#o.concurrency,
        tasks: planned.length,
        held: view ? view.held(taskId) : (this.#runningByTask.get(taskId) ?? 0),
        taskLimit: this.#o.taskConcurrency?.({ taskId, key }),
        fair: this.#o.fairShare ?? true,
      });
      if (!may) {
        excluded.add(taskId);
        heldBack = true;
      }
    }
    if (heldBack) this.#o.onHeldBack?.();
    return excluded;
  }

  /** Counts work against the concurrency (and its task's slots) and drained() until it ends. */
  #track(work: Promise<void>, taskId?: string): void {
    if (taskId !== undefined) this.#runningByTask.set(taskId, (this.#runningByTask.get(taskId) ?? 0) + 1);
    const running = work.finally(() => {
      if (taskId !== undefined) {
        const left = (this.#runningByTask.get(taskId) ?? 1) - 1;
        if (left > 0) this.#runningByTask.set(taskId, left);
        else this.#runningByTask.delete(taskId);
      }
      this.#running.delete(running);
      this.#o.onReportsOwed?.(this.reportsOwed);
      this.#nudge.abort();
    });
    this.#running.add(running);
    this.#o.onReportsOwed?.(this.reportsOwed);
  }

  #setAuthorized(authorized: boolean, error?: unknown): void {
    if (authorized === !this.#unauthorized) return;
    this.#unauthorized = !authorized;
    if (authorized) {
      this.#o.logger.info('the service accepts the API key again; polling resumes');
      // The other tasks wait out the refused key's back-off step otherwise.
      this.#o.planner.wake(this.#o.clock.monotonic());
      this.#nudge.abort();
    } else
      this.#o.logger.error(
        { err: error as Error },
        'the service refused the API key (401); polling stops and one poll tries it again per back-off step ' +
          '(at once when DF_API_KEY_FILE gives another key)',
      );
    this.#o.onAuthorizationChange?.(authorized);
  }

  async #waitForNudge(ms: number): Promise<void> {
    if (this.#nudge.signal.aborted) this.#nudge = new AbortController();
    const signal = this.#nudge.signal;
    try {
      if (Number.isFinite(ms)) await this.#o.clock.sleep(ms, signal);
      else
        await new Promise<void>((resolve) => {
          signal.addEventListener('abort', () => resolve(), { once: true });
        });
    } catch {
      // Nudged: a slot freed, a wake, or shutdown.
    } finally {
      if (this.#nudge.signal === signal && signal.aborted) this.#nudge = new AbortController();
    }
  }
}
