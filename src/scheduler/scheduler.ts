// The poll loop: picks the task the planner says is due, polls it within budget only when a handler slot
// is free (so nothing is claimed that cannot start at once), and hands each claimed execution off.
import { pollOnce } from './poll-once.ts';
import type { PolledTask, SchedulerOptions } from './scheduler-options.ts';
import { mayTakeSlot } from './slot-share.ts';

export type { PolledTask, SchedulerOptions, SlotView } from './scheduler-options.ts';
export { POLL_ANSWER_LOSSES, type PollAnswerLoss, type PollResult } from '../events/worker-events.ts';

/**
 * The reason every nudge aborts with: abort() without one builds a DOMException (a stack trace) on each call,
 * even on a signal already aborted, and the loop is nudged after every poll and every execution.
 */
const NUDGED = new Error('nudged');

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
  /**
   * A new key came while a poll was out: that poll left with the old key, and its 401 (answered after the change)
   * would put the next try off by a whole back-off step. Once the polls out have settled, one poll tries at once.
   */
  #keyChangedWhilePolling = false;
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
    this.#nudge.abort(NUDGED);
  }

  /**
   * Polls the given task (or all) as soon as budget and a free slot allow. Returns how many tasks matched.
   * While the key is refused, the next poll keeps its back-off step: a wake would spend a request on a 401.
   */
  wake(taskKey?: string): number {
    if (this.#unauthorized)
      return this.#o.planner.tasks.filter((t) => taskKey === undefined || t.key === taskKey).length;
    const woken = this.#o.planner.wake(this.#o.clock.monotonic(), taskKey);
    this.#nudge.abort(NUDGED);
    return woken;
  }

  /** Another key is in use (DF_API_KEY_FILE changed): while the last was refused, one poll tries it now. */
  keyChanged(): void {
    if (this.#polling.size > 0) this.#keyChangedWhilePolling = true;
    if (this.#unauthorized) this.#tryKeyNow();
  }

  #tryKeyNow(): void {
    const first = this.#o.planner.tasks[0];
    if (first) this.#o.planner.wake(this.#o.clock.monotonic(), first.key);
    this.#nudge.abort(NUDGED);
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
    this.#nudge.abort(NUDGED);
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
    signal.addEventListener('abort', () => this.#nudge.abort(NUDGED), { once: true });
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
    const polling = pollOnce(this.#o, task, signal, {
      track: (work) => this.#track(work, task.taskId),
      setAuthorized: (authorized, error) => this.#setAuthorized(authorized, error),
    })
      .catch((error: unknown) => {
        this.#o.logger.error({ taskKey: task.key, err: error as Error }, 'poll failed unexpectedly');
      })
      .finally(() => {
        this.#polling.delete(task.taskId);
        this.#o.onReportsOwed?.(this.reportsOwed);
        if (this.#keyChangedWhilePolling && this.#polling.size === 0) {
          this.#keyChangedWhilePolling = false;
          if (this.#unauthorized) this.#tryKeyNow();
        }
        this.#nudge.abort(NUDGED);
      });
    this.#polling.set(task.taskId, polling);
    this.#o.onReportsOwed?.(this.reportsOwed);
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
      this.#nudge.abort(NUDGED);
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
      this.#nudge.abort(NUDGED);
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
