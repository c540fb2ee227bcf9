// The daemon: wires handlers, journal, budget, client, scheduler and pipeline together, with an explicit
// lifecycle: start() (fails fast on bad handlers, an unusable state folder or a refused key), stop() (drains).
import type { Logger } from 'pino';
import type { ServiceClient } from '../api/client.ts';
import type { Budget } from '../budget/budget.ts';
import { systemClock, type Clock } from '../clock/clock.ts';
import type { WorkerConfig } from '../config/schema.ts';
import type { TaskModule } from '../handlers/define-task.ts';
import { budgetFile, checkedBudgetStore, fileBudgetStore, type CheckedBudgetStore } from '../budget/store.ts';
import { Journal, requestsShownByJournal } from '../journal/journal.ts';
import { StateLock } from '../journal/state-lock.ts';
import { sandboxFromConfig, type Sandbox } from '../sandbox/index.ts';
import type { PollPlanner } from '../scheduler/poll-planner.ts';
import { Reporter } from '../scheduler/reporter.ts';
import { Scheduler } from '../scheduler/scheduler.ts';
import { WorkerMetrics, type PacingSnapshot } from '../telemetry/metrics.ts';
import { ExecutionPipeline } from './execution-pipeline.ts';
import { JournalReplay } from './journal-replay.ts';
import { pipelineMetrics } from './pipeline-metrics.ts';
import {
  backoffFromConfig,
  budgetFromConfig,
  reportReserveFor,
  clientFromConfig,
  logRateLimitPause,
  plannerFromConfig,
} from './service-wiring.ts';
import { TaskList } from './task-list.ts';
import { TaskRegistry } from './task-registry.ts';

export { StartupError } from './task-list.ts';

/**
 * Exit code of a daemon that stopped because its state folder's lock vanished or changed owner (sysexits
 * EX_TEMPFAIL): another daemon may use the folder and the key; a supervisor restarting it meets that lock.
 */
export const EXIT_STATE_LOCK_LOST = 75;

export interface WorkerOptions {
  config: WorkerConfig;
  logger: Logger;
  clock?: Clock;
  /** Handlers already loaded (tests, demo); default: loaded from `config.handlers.dir`. */
  handlers?: ReadonlyMap<string, TaskModule>;
  /**
   * Handlers from `config.handlers.dir` whose loading began before the worker was made (`df-worker start`
   * starts it before the daemon's own modules load, and the two run side by side); a rejection fails start()
   * as a load by the worker would. Default: loaded by start().
   */
  handlersLoading?: Promise<ReadonlyMap<string, TaskModule>>;
  metrics?: WorkerMetrics;
}

export interface Readiness {
  ready: boolean;
  checks: Record<string, { ok: boolean; reason?: string }>;
  /**
   * The tasks polled, and the handlers whose task is not on the service (as of the last task list). Information,
   * not a check: a worker serving no task stays ready; the alerts DfWorkerNoTaskServed and
   * DfWorkerHandlerWithoutTask report it.
   */
  tasks: { served: string[]; withoutTask: string[] };
}

type State = 'new' | 'starting' | 'running' | 'stopping' | 'stopped';

/**
 * The readiness checks both wirings share: started, handlers loaded, and the service answering and taking the
 * key. `authorized` is undefined until a poll was answered.
 */
export function commonReadinessChecks(parts: {
  state: string;
  handlersLoaded: boolean;
  serviceAnswered: boolean;
  authorized: boolean | undefined;
}): Readiness['checks'] {
  return {
    started: parts.state === 'running' ? { ok: true } : { ok: false, reason: `worker is ${parts.state}` },
    handlers: parts.handlersLoaded ? { ok: true } : { ok: false, reason: 'handlers not loaded' },
    service: parts.serviceAnswered
      ? parts.authorized === false
        ? { ok: false, reason: 'the service refuses the API key (401)' }
        : { ok: true }
      : { ok: false, reason: 'the service has not answered yet' },
  };
}

export class Worker {
  readonly metrics: WorkerMetrics;
  readonly #config: WorkerConfig;
  readonly #logger: Logger;
  readonly #clock: Clock;
  #state: State = 'new';
  #handlers: ReadonlyMap<string, TaskModule> | undefined;
  #handlersLoading: Promise<ReadonlyMap<string, TaskModule>> | undefined;
  #journal: Journal | undefined;
  #lock: StateLock | undefined;
  #budget: Budget | undefined;
  #client: ServiceClient | undefined;
  #registry: TaskRegistry | undefined;
  #planner: PollPlanner | undefined;
  /** Writes what the planner learnt of arrivals to the state folder. */
  #saveProfile: (() => Promise<void>) | undefined;
  #taskList: TaskList | undefined;
  #scheduler: Scheduler | undefined;
  #pipeline: ExecutionPipeline | undefined;
  readonly #pollStop = new AbortController();
  readonly #handlerStop = new AbortController();
  readonly #reportStop = new AbortController();
  #loops: Promise<unknown>[] = [];
  #stopping: Promise<void> | undefined;
  #starting: Promise<void> | undefined;
  /** Where handler attempts run; its workers are terminated once every execution has ended. */
  #sandbox: Sandbox | undefined;
  #replay: JournalReplay | undefined;
  #budgetStore: CheckedBudgetStore | undefined;
  /** Why this daemon no longer holds the state folder, once it found out. */
  #lockLost: string | undefined;
  readonly #ownStop = Promise.withResolvers<number>();

  constructor(options: WorkerOptions) {
    this.#config = options.config;
    this.#logger = options.logger;
    this.#clock = options.clock ?? systemClock;
    this.#handlers = options.handlers;
    this.#handlersLoading = options.handlersLoading;
    // /metrics may be scraped while the worker starts, before the budget exists.
    this.metrics =
      options.metrics ??
      new WorkerMetrics({
        budget: () => this.#budget?.snapshot(),
        ready: () => this.readiness().ready,
        pacing: () => this.#pacing(),
      });
  }

  get state(): State {
    return this.#state;
  }

  get budget(): Budget | undefined {
    return this.#budget;
  }

  get client(): ServiceClient | undefined {
    return this.#client;
  }

  /** Resolves with the process's exit code when the worker stopped on its own (its state lock lost). */
  get stoppedOnItsOwn(): Promise<number> {
    return this.#ownStop.promise;
  }

  /**
   * Loads handlers, takes the state folder, replays the journal and starts polling. A stop() meanwhile
   * ends the start early; it then resolves without polling (stop() drains what the replay began).
   */
  async start(): Promise<void> {
    if (this.#state !== 'new') throw new Error(`Worker.start() called in state ${this.#state}`);
    this.#state = 'starting';
    this.#starting = this.#start();
    try {
      await this.#starting;
    } catch (error) {
      if (this.#stopRequested) return;
      throw error;
    }
  }

  get #stopRequested(): boolean {
    return this.#pollStop.signal.aborted;
  }

  async #start(): Promise<void> {
    const config = this.#config;
    const logger = this.#logger;
    const sandbox = sandboxFromConfig(config, logger, { observer: this.metrics.handlerWorkerObserver() });
    this.#sandbox = sandbox;
    const handlers =
      this.#handlers ?? (await (this.#handlersLoading ?? sandbox.loadHandlers(config.handlers.dir, logger)));
    this.#handlers = handlers;
    logger.info({ handlers: [...handlers.keys()], dir: config.handlers.dir }, 'handlers loaded');

    this.#lock = await StateLock.acquire(config.state.dir);
    this.#lock.watch(config.state.lockCheckMs, (reason) => this.#loseLock(reason));
    this.#journal = await Journal.open(config.state.dir, { logger, clock: this.#clock });
    const pending = await this.#journal.pending();
    const damaged = this.#journal.damaged();
    // A budget.json the journal and the lock contradict (missing, or counting fewer) is no first start.
    const previous = this.#lock.previousHolder;
    const requestsAt = requestsShownByJournal(pending);
    if (previous) requestsAt.push(Date.parse(previous.startedAt));
    // A journal folder changed by a run shows that run's requests (one at least), its records aside.
    const journalChangedAt = this.#journal.lastChangedBefore;
    if (journalChangedAt !== undefined && requestsAt.length === 0) requestsAt.push(journalChangedAt);
    this.#budgetStore = checkedBudgetStore(
      fileBudgetStore(config.state.dir),
      budgetFile(config.state.dir),
      { stateFolderUsed: this.#journal.usedBefore, requestsAt },
      {
        timeZone: config.budget.timeZone,
        onHandOverWait: (untilMs) =>
          logger.warn(
            { until: new Date(untilMs).toISOString() },
            'a df-worker that lost this state folder is still reporting the executions it ran; waiting for ' +
              'it to finish (at most until the instant given) before the first request',
          ),
      },
    );

    // Every claimed execution needs at least one report, plus room for a retry: the journal's records first.
    this.#budget = budgetFromConfig(
      config,
      this.#clock,
      reportReserveFor(pending.length + damaged.length),
      this.#budgetStore,
      logRateLimitPause(logger),
    );
    await this.#budgetStore.waitForHandOver();
    const restored = await this.#budget.load();
    let month = this.#budget.snapshot().month;
    if (restored === 'estimated') {
      // The conservative reading: at least what the journal and the lock prove was sent this month.
      const monthStartMs = this.#budget.month().startsAt;
      this.#budget.observeMonthUsed(month.key, requestsAt.filter((at) => at >= monthStartMs).length);
      month = this.#budget.snapshot().month;
      const problem = this.#budgetStore.problem;
      logger.warn(
        { used: month.used, file: budgetFile(config.state.dir), problem },
        `${problem ?? 'the saved month budget usage could not be read'}; assuming an even spend of the month ` +
          'so far (at least what the journal shows), and full per-second and per-minute windows (the first ' +
          'requests wait a minute)',
      );
    } else if (restored === 'clock-behind') {
      logger.warn(
        { month: month.key, used: month.used, now: new Date(this.#clock.now()).toISOString() },
        "the saved budget usage is of a later month than this machine's clock says: the clock is behind; " +
          'requests count into that later month',
      );
    } else {
      logger.info({ month: month.key, used: month.used, limit: month.limit }, 'month budget usage');
    }

    this.#client = clientFromConfig(config, this.#budget, (e) =>
      this.metrics.observeResponse(e.operation, e.status, e.durationMs),
    );
    this.#registry = new TaskRegistry({
      handlers,
      client: this.#client,
      logger,
      sync: config.tasks.sync,
    });
    this.#taskList = new TaskList({
      registry: this.#registry,
      config,
      logger,
      clock: this.#clock,
      metrics: this.metrics,
    });
    await this.#taskList.first(this.#pollStop.signal);

    const reporter = new Reporter({
      client: this.#client,
      clock: this.#clock,
      logger,
      backoff: backoffFromConfig(config),
    });
    this.#pipeline = new ExecutionPipeline({
      journal: this.#journal,
      reporter,
      clock: this.#clock,
      logger,
      defaultTimeoutMs: config.handlers.timeoutMs,
      backoff: backoffFromConfig(config),
      lookup: (id) => this.#registry?.byId(id),
      handlerSignal: this.#handlerStop.signal,
      reportSignal: this.#reportStop.signal,
      observer: pipelineMetrics(this.metrics, this.#clock, () => this.#journal?.counts),
      host: sandbox.host,
      // Handlers' own calls share the key's budget below reports and above idle polls; its 429 pauses all.
      service: this.#client.withGate(this.#budget.gateFor('handler')),
      redact: sandbox.redact,
      maxCrashesPerExecution: config.journal.maxCrashesPerExecution,
    });
    if (this.#stopRequested) return;

    const planner = await plannerFromConfig(config, this.#budget, { logger });
    this.#planner = planner;
    this.#saveProfile = planner.save;
    this.#taskList.plan(planner);
    this.#scheduler = new Scheduler({
      client: this.#client,
      planner: this.#planner,
      clock: this.#clock,
      logger,
      concurrency: config.concurrency,
      // A refused key is retried at the slowest back-off: an operator has to act anyway.
      unauthorizedRetryMs: config.scheduler.errorBackoffMaxMs,
      claimBlocker: () =>
        this.#lockBlocker() ??
        (this.#journal?.writable === false
          ? `the journal cannot be written (${this.#journal.lastError?.message ?? 'unknown error'})`
          : this.#replay?.quarantined
            ? 'an execution that was running when df-worker died is run again alone first ' +
              '(DF_HANDLER_ISOLATION=none: a handler that kills the daemon would lose the claims in flight)'
            : undefined),
      dispatch: (task, execution) => this.#pipeline!.process(task, execution),
      failUnreadable: (task, executionId, problem) =>
        this.#pipeline!.failUnreadable(task, executionId, problem),
      onPoll: (task, result) => this.metrics.polls.inc({ task: task.key, result }),
      onPollAnswerLost: (task, reason) => this.metrics.pollAnswersLost.inc({ task: task.key, reason }),
      // A poll still unanswered when the reports' flush window ends is cut, its answer lost.
      cutPolls: this.#reportStop.signal,
      // The journal's records are owed their reports too, until the replay has handed them all over.
      onReportsOwed: (owed) => {
        if (this.#budget) this.#budget.reportReserve = reportReserveFor(owed + (this.#replay?.waiting ?? 0));
      },
    });
    // The replay takes slots beside polling, never ahead of all of it: a poison execution left by a crash
    // must not keep other tasks from being polled.
    this.#replay = new JournalReplay({
      pipeline: this.#pipeline,
      scheduler: this.#scheduler,
      logger,
      metrics: this.metrics,
      mode: config.journal.replay,
      quarantine: config.handlers.isolation === 'none',
      journal: this.#journal,
      client: this.#client,
      clock: this.#clock,
      backoff: backoffFromConfig(config),
      signal: this.#pollStop.signal,
    });
    this.#replay.start(pending);
    this.#replay.recover(damaged);
    this.#state = 'running';
    this.#taskList.warnOfCostlyRefresh();
    this.#loops = [
      this.#scheduler.run(this.#pollStop.signal),
      this.#taskList.refreshLoop(this.#pollStop.signal),
      this.#journalRecheckLoop(),
      this.#profileSaveLoop(),
    ];
    logger.info(
      {
        tasks: this.#registry.tasks.map((t) => t.task.key),
        concurrency: config.concurrency,
        budget: config.budget,
        idlePollIntervalSeconds: Math.round(this.#planner.idleIntervalMs(this.#clock.now()) / 1000),
      },
      'df-worker started',
    );
  }

  /** Checked before every poll: a lost lock stops claiming at once (the timer may not have fired yet). */
  #lockBlocker(): string | undefined {
    const lost = this.#lockLost ?? this.#lock?.verify();
    if (lost === undefined) return undefined;
    this.#loseLock(lost);
    return `this daemon no longer holds the state folder (${lost})`;
  }

  /**
   * Another daemon may now use the state folder and the key: stop claiming at once, report what runs (those
   * claims are this daemon's alone on the service), leave the month's usage and the last minute's sends in a
   * budget.json only where the new owner has none yet, and exit with EXIT_STATE_LOCK_LOST.
   */
  #loseLock(reason: string): void {
    if (this.#lockLost !== undefined) return;
    this.#lockLost = reason;
    this.#logger.error(
      { reason, stateDir: this.#config.state.dir, exitCode: EXIT_STATE_LOCK_LOST },
      `df-worker lost its state folder ${this.#config.state.dir}: ${reason}; it stops claiming, reports the ` +
        `executions it runs and exits ${EXIT_STATE_LOCK_LOST}. Run one df-worker per DF_STATE_DIR and never ` +
        'delete the state folder of a running one',
    );
    // At most the drain of stop(): the grace period, then the reports' flush window, and a second's margin.
    const graceMs = this.#config.shutdownGraceMs;
    this.#budgetStore?.handOff(Date.now() + graceMs + Math.max(5_000, graceMs / 2) + 1_000);
    // Before the budget was loaded it has nothing to leave (and a count of 0 would understate the month).
    if (this.#state === 'running') {
      this.#budget?.flush().catch((error: unknown) => {
        this.#logger.warn(
          { err: error as Error },
          'could not leave the month budget usage for the next owner',
        );
      });
    }
    // Not from within the scheduler's claim check: its loop must first reach the wait that stop() interrupts.
    setImmediate(() => void this.stop().then(() => this.#ownStop.resolve(EXIT_STATE_LOCK_LOST)));
  }

  #pacing(): PacingSnapshot | undefined {
    const planner = this.#planner;
    if (!planner) return undefined;
    const now = this.#clock.now();
    return {
      tasks: planner.tasks.map((t) => ({ key: t.key, idleIntervalMs: planner.idleIntervalMs(now, t.key) })),
      overloaded: planner.overloaded(now),
    };
  }

  /**
   * Serves `handlers` instead of those it started with (df-worker dev, once the handler files changed): the task
   * list is read again and matched to them, and handler workers started before are let go, so the next attempt
   * imports the files afresh; attempts running finish on the code they started with. A task whose handler is
   * not in `handlers` is no longer polled. Every task served is then polled at once.
   */
  async replaceHandlers(handlers: ReadonlyMap<string, TaskModule>): Promise<void> {
    if (this.#state !== 'running') throw new Error(`Worker.replaceHandlers() called in state ${this.#state}`);
    this.#handlers = handlers;
    this.#registry!.setHandlers(handlers);
    this.#sandbox?.retire();
    await this.#taskList!.refresh(this.#pollStop.signal);
    this.wake();
  }

  /** Polls one task (or all) now, within budget. Returns how many tasks matched. */
  wake(taskKey?: string): number {
    return this.#scheduler?.wake(taskKey) ?? 0;
  }

  readiness(): Readiness {
    const checks: Readiness['checks'] = {
      ...commonReadinessChecks({
        state: this.#state,
        handlersLoaded: this.#handlers !== undefined,
        serviceAnswered: this.#taskList?.answered === true,
        authorized: this.#scheduler?.authorized,
      }),
      journal:
        this.#journal?.writable === false
          ? { ok: false, reason: this.#journal.lastError?.message ?? 'journal not writable' }
          : { ok: this.#journal !== undefined },
    };
    const tasks = {
      served: this.#registry?.tasks.map((t) => t.task.key) ?? [],
      withoutTask: this.#taskList?.withoutTask ?? [],
    };
    return { ready: Object.values(checks).every((c) => c.ok), checks, tasks };
  }

  /**
   * Graceful stop: no new polls at once; running handlers get the grace period, then are aborted (and
   * reported FAILED); pending reports are flushed; what cannot be reported stays in the journal.
   */
  stop(): Promise<void> {
    this.#stopping ??= this.#stop();
    return this.#stopping;
  }

  async #stop(): Promise<void> {
    const logger = this.#logger;
    this.#state = 'stopping';
    this.#pollStop.abort(new Error('worker stopping'));
    await Promise.allSettled(this.#loops);
    const drained = () => this.#scheduler?.drained() ?? Promise.resolve();
    if (this.#scheduler) {
      logger.info(
        { inFlight: this.#scheduler.inFlight, graceMs: this.#config.shutdownGraceMs },
        'stopping: waiting for running executions',
      );
      const graceOver = await this.#race(drained(), this.#config.shutdownGraceMs);
      if (graceOver) {
        logger.warn('grace period over: aborting running handlers; they are reported FAILED');
        this.#handlerStop.abort(new Error('shutdown grace period over'));
        // Reports of aborted handlers still get a short window to reach the service.
        const flushOver = await this.#race(drained(), Math.max(5_000, this.#config.shutdownGraceMs / 2));
        if (flushOver) this.#reportStop.abort(new Error('shutdown flush window over'));
        await drained();
      }
    }
    this.#handlerStop.abort(new Error('worker stopped'));
    this.#reportStop.abort(new Error('worker stopped'));
    await this.#sandbox?.close();
    // start() ends soon after the stop signal; its resources are released below only once it has.
    await Promise.allSettled([this.#starting]);
    // Every request of this run has been sent: a daemon waiting for this one's hand-over may go on.
    this.#budgetStore?.handOffDone();
    try {
      await this.#budget?.flush();
    } catch (error) {
      logger.warn({ err: error as Error }, 'could not save the month budget usage');
    }
    // A lost state folder is another daemon's now: what this one learnt is not written over its own.
    if (this.#lockLost === undefined) await this.#writeProfile();
    await this.#client?.close();
    await this.#lock?.release();
    this.#state = 'stopped';
    logger.info({ journalPending: this.#journal?.counts.pending ?? 0 }, 'df-worker stopped');
  }

  /** True when `ms` ran out before `promise` settled. */
  async #race(promise: Promise<void>, ms: number): Promise<boolean> {
    const timer = new AbortController();
    const expired = this.#clock.sleep(ms, timer.signal).then(
      () => true,
      () => false,
    );
    const result = await Promise.race([promise.then(() => false), expired]);
    timer.abort();
    return result;
  }

  /** Saves what the planner learnt of arrivals every hour, so a crash loses an hour of it at most. */
  async #profileSaveLoop(): Promise<void> {
    const signal = this.#pollStop.signal;
    while (!signal.aborted) {
      try {
        await this.#clock.sleep(3_600_000, signal);
      } catch {
        return;
      }
      await this.#writeProfile();
    }
  }

  async #writeProfile(): Promise<void> {
    try {
      await this.#saveProfile?.();
    } catch (error) {
      this.#logger.warn({ err: error as Error }, 'could not save the arrival profile');
    }
  }

  async #journalRecheckLoop(): Promise<void> {
    const signal = this.#pollStop.signal;
    while (!signal.aborted) {
      try {
        await this.#clock.sleep(this.#config.journal.recheckMs, signal);
        if (this.#journal && !this.#journal.writable && (await this.#journal.recheck())) {
          this.#logger.info('the journal is writable again');
          this.#scheduler?.wake();
        }
        this.metrics.journalPending.set(this.#journal?.counts.pending ?? 0);
        this.metrics.journalDeadLettered.set(this.#journal?.counts.deadLettered ?? 0);
      } catch {
        if (signal.aborted) return;
      }
    }
  }
}
