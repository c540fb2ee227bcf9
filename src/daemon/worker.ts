// The daemon: wires handlers, journal, budget, client, scheduler and pipeline together, with an explicit
// lifecycle: start() (fails fast on bad handlers, an unusable state folder or a refused key), stop() (drains).
import type { Logger } from 'pino';
import type { ServiceClient } from '../api/client.ts';
import { ServiceError } from '../api/errors.ts';
import type { Budget } from '../budget/budget.ts';
import { backoffDelayMs } from '../clock/backoff.ts';
import { systemClock, type Clock } from '../clock/clock.ts';
import type { WorkerConfig } from '../config/schema.ts';
import type { TaskModule } from '../handlers/define-task.ts';
import { Journal, type JournalEntry } from '../journal/journal.ts';
import { StateLock } from '../journal/state-lock.ts';
import { sandboxFromConfig, type Sandbox } from '../sandbox/index.ts';
import type { PollPlanner } from '../scheduler/poll-planner.ts';
import { Reporter } from '../scheduler/reporter.ts';
import { classifyFailure } from '../scheduler/retry-policy.ts';
import { Scheduler } from '../scheduler/scheduler.ts';
import { WorkerMetrics, type PacingSnapshot } from '../telemetry/metrics.ts';
import { ExecutionPipeline, type PipelineObserver } from './execution-pipeline.ts';
import {
  backoffFromConfig,
  budgetFromConfig,
  clientFromConfig,
  plannerFromConfig,
  taskRefreshIntervalMs,
} from './service-wiring.ts';
import { TaskRegistry } from './task-registry.ts';

export interface WorkerOptions {
  config: WorkerConfig;
  logger: Logger;
  clock?: Clock;
  /** Handlers already loaded (tests, demo); default: loaded from `config.handlers.dir`. */
  handlers?: ReadonlyMap<string, TaskModule>;
  metrics?: WorkerMetrics;
}

/** start() refused to run: the message says what to fix. The CLI exits non-zero with it. */
export class StartupError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'StartupError';
  }
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

export class Worker {
  readonly metrics: WorkerMetrics;
  readonly #config: WorkerConfig;
  readonly #logger: Logger;
  readonly #clock: Clock;
  #state: State = 'new';
  #handlers: ReadonlyMap<string, TaskModule> | undefined;
  #journal: Journal | undefined;
  #lock: StateLock | undefined;
  #budget: Budget | undefined;
  #client: ServiceClient | undefined;
  #registry: TaskRegistry | undefined;
  #planner: PollPlanner | undefined;
  /** Writes what the planner learnt of arrivals to the state folder. */
  #saveProfile: (() => Promise<void>) | undefined;
  /** Every handler has its task on the service (the task list is then refreshed less often). */
  #everyHandlerServed = false;
  /** Handler keys with no task on the service, as of the last task list. */
  #withoutTask: string[] = [];
  #scheduler: Scheduler | undefined;
  #pipeline: ExecutionPipeline | undefined;
  readonly #pollStop = new AbortController();
  readonly #handlerStop = new AbortController();
  readonly #reportStop = new AbortController();
  #loops: Promise<unknown>[] = [];
  #serviceAnswered = false;
  #stopping: Promise<void> | undefined;
  #starting: Promise<void> | undefined;
  /** Where handler attempts run; its workers are terminated once every execution has ended. */
  #sandbox: Sandbox | undefined;
  /** Replayed executions running alone while no claim is made (see #replay). */
  #quarantined = 0;

  constructor(options: WorkerOptions) {
    this.#config = options.config;
    this.#logger = options.logger;
    this.#clock = options.clock ?? systemClock;
    this.#handlers = options.handlers;
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
    const handlers = this.#handlers ?? (await sandbox.loadHandlers(config.handlers.dir, logger));
    this.#handlers = handlers;
    logger.info({ handlers: [...handlers.keys()], dir: config.handlers.dir }, 'handlers loaded');

    this.#lock = await StateLock.acquire(config.state.dir);
    this.#journal = await Journal.open(config.state.dir, { logger, clock: this.#clock });
    const pending = await this.#journal.pending();

    // Every claimed execution needs at least one report, plus room for a retry.
    this.#budget = budgetFromConfig(config, this.#clock, 2 * (config.concurrency + pending.length));
    const restored = await this.#budget.load();
    const month = this.#budget.snapshot().month;
    if (restored === 'estimated') {
      logger.warn(
        { used: month.used, file: `${config.state.dir}/budget.json` },
        'the saved month budget usage could not be read; assuming an even spend of the month so far, and ' +
          'full per-second and per-minute windows (the first requests wait a minute)',
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

    this.#client = clientFromConfig(config, this.#budget, (e) => {
      this.metrics.observeResponse(e.operation, e.status, e.durationMs);
      if (e.status === 429) {
        // The budget gate has already paused every request (it hears every answer): this only says so.
        const pausedForMs = Math.max(0, (this.#budget?.pausedUntil ?? 0) - this.#clock.now());
        this.#logger.warn({ operation: e.operation, pausedForMs }, 'the service answered 429 RATE_LIMIT');
      }
    });
    this.#registry = new TaskRegistry({
      handlers,
      client: this.#client,
      logger,
      sync: config.tasks.sync,
    });
    await this.#firstTaskList();

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
      observer: this.#pipelineObserver(),
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
    this.#planTasks();
    this.#scheduler = new Scheduler({
      client: this.#client,
      planner: this.#planner,
      clock: this.#clock,
      logger,
      concurrency: config.concurrency,
      // A refused key is retried at the slowest back-off: an operator has to act anyway.
      unauthorizedRetryMs: config.scheduler.errorBackoffMaxMs,
      claimBlocker: () =>
        this.#journal?.writable === false
          ? `the journal cannot be written (${this.#journal.lastError?.message ?? 'unknown error'})`
          : this.#quarantined > 0
            ? 'an execution that was running when df-worker died is run again alone first ' +
              '(DF_HANDLER_ISOLATION=none: a handler that kills the daemon would lose the claims in flight)'
            : undefined,
      dispatch: (task, execution) => this.#pipeline!.process(task, execution),
      failUnreadable: (task, executionId, problem) =>
        this.#pipeline!.failUnreadable(task, executionId, problem),
      onPoll: (task, result) => this.metrics.polls.inc({ task: task.key, result }),
      onPollAnswerLost: (task) => this.metrics.pollAnswersLost.inc({ task: task.key }),
    });
    // The replay takes slots beside polling, never ahead of all of it: a poison execution left by a crash
    // must not keep other tasks from being polled.
    this.#replay(pending, this.#scheduler);
    this.#state = 'running';
    const refreshesPerMonth = (30 * 86_400_000) / config.scheduler.taskRefreshMs;
    if (!this.#everyHandlerServed && refreshesPerMonth > config.budget.perMonth / 10) {
      // Each refresh lists the tasks (a request per page of 1,000) against the same monthly budget.
      logger.warn(
        { taskRefreshMs: config.scheduler.taskRefreshMs, refreshesPerMonth: Math.round(refreshesPerMonth) },
        "DF_TASK_REFRESH_MS makes task list refreshes take more than a tenth of the month's budget while a " +
          'handler has no task; polls get less of it (the default, 1 hour, takes 720 requests a month)',
      );
    }
    this.#loops = [
      this.#scheduler.run(this.#pollStop.signal),
      this.#refreshLoop(),
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
    const match = await this.#registry!.refresh(this.#pollStop.signal);
    this.#everyHandlerServed = match.missing.length === 0;
    this.#planTasks();
    this.#withoutTask = match.missing;
    this.metrics.observeTaskMatch(match.registered.length, match.missing);
    this.wake();
  }

  /** Polls one task (or all) now, within budget. Returns how many tasks matched. */
  wake(taskKey?: string): number {
    return this.#scheduler?.wake(taskKey) ?? 0;
  }

  readiness(): Readiness {
    const checks: Readiness['checks'] = {
      started: this.#state === 'running' ? { ok: true } : { ok: false, reason: `worker is ${this.#state}` },
      handlers: this.#handlers ? { ok: true } : { ok: false, reason: 'handlers not loaded' },
      service: this.#serviceAnswered
        ? this.#scheduler?.authorized === false
          ? { ok: false, reason: 'the service refuses the API key (401)' }
          : { ok: true }
        : { ok: false, reason: 'the service has not answered yet' },
      journal:
        this.#journal?.writable === false
          ? { ok: false, reason: this.#journal.lastError?.message ?? 'journal not writable' }
          : { ok: this.#journal !== undefined },
    };
    const tasks = {
      served: this.#registry?.tasks.map((t) => t.task.key) ?? [],
      withoutTask: [...this.#withoutTask],
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
    try {
      await this.#budget?.flush();
    } catch (error) {
      logger.warn({ err: error as Error }, 'could not save the month budget usage');
    }
    await this.#writeProfile();
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

  async #firstTaskList(): Promise<void> {
    const signal = this.#pollStop.signal;
    for (let attempt = 1; ; attempt++) {
      try {
        const match = await this.#registry!.refresh(signal);
        this.#everyHandlerServed = match.missing.length === 0;
        this.#serviceAnswered = true;
        this.#withoutTask = match.missing;
        this.metrics.observeTaskMatch(match.registered.length, match.missing);
        if (match.registered.length === 0) {
          this.#logger.warn(
            { handlers: [...this.#handlers!.keys()] },
            'no task on the service matches a handler; nothing will be polled until one does',
          );
        }
        return;
      } catch (error) {
        const action = classifyFailure(error);
        if (error instanceof ServiceError && (error.status === 401 || error.status === 403)) {
          throw new StartupError(
            error.status === 401
              ? 'the service refused the API key (401 UNAUTHENTICATED): check DF_API_KEY or DF_API_KEY_FILE'
              : 'the API key lacks permission to list tasks (403)',
            { cause: error },
          );
        }
        if (action.kind === 'permanent') {
          throw new StartupError(`could not list the service's tasks: ${(error as Error).message}`, {
            cause: error,
          });
        }
        // After a 429 the budget gate holds the retry until its pause ends.
        const waitMs =
          action.kind === 'rate-limited' ? 0 : backoffDelayMs(attempt, backoffFromConfig(this.#config));
        this.#logger.warn(
          { err: error as Error, attempt, retryInMs: waitMs },
          'could not list the service tasks yet; retrying',
        );
        await this.#clock.sleep(waitMs, signal);
      }
    }
  }

  #replay(pending: Awaited<ReturnType<Journal['pending']>>, scheduler: Scheduler): void {
    if (pending.length === 0) return;
    const mode = this.#config.journal.replay;
    this.#logger.warn({ count: pending.length, mode }, 'replaying the journal beside polling');
    let left = pending.length;
    const replay = async (entry: JournalEntry) => {
      this.metrics.replayed.inc({ phase: entry.phase });
      try {
        await this.#pipeline!.resume(entry, mode);
      } catch (error) {
        // resume() settles every record itself; one that still fails must not keep the others from
        // their replay. It stays in the journal for the next start.
        this.#logger.error(
          { err: error as Error, executionId: entry.executionId },
          'could not replay a journal record; it stays in the journal',
        );
      }
      // The report reserve held room for the replayed executions' reports until the last one ended.
      if (--left === 0) this.#budget!.reportReserve = 2 * this.#config.concurrency;
    };
    // A run still claimed after two or more starts has died with the daemon more than once: a suspect.
    // Suspects rerun one at a time, so that the one that kills the daemon does not take the others' counts
    // up with it, and an innocent execution is not failed as poison for dying beside it. Without isolation
    // every execution that was running is a suspect (its handler may be what killed the daemon), and no
    // claim is made while one runs: a death then would lose the poll answers in flight with it.
    const quarantine = this.#config.handlers.isolation === 'none';
    const suspects = pending.filter(
      (e) => e.phase === 'claimed' && mode === 'rerun' && (quarantine || (e.starts ?? 1) >= 2),
    );
    for (const entry of pending) if (!suspects.includes(entry)) scheduler.enqueue(() => replay(entry));
    if (quarantine && suspects.length > 0) this.#quarantined++;
    const next = () => {
      const entry = suspects.shift();
      if (entry) scheduler.enqueue(() => replay(entry).finally(next));
      else if (quarantine && this.#quarantined > 0) {
        this.#quarantined--;
        scheduler.wake();
      }
    };
    next();
  }

  #planTasks(): void {
    const tasks = this.#registry!.tasks.map((r) => ({ id: r.task.id, key: r.task.key }));
    this.#planner!.setTasks(tasks, this.#clock.now());
    this.metrics.tasksServed.set(tasks.length);
    // Present at 0 for each task served, so increase() in an alert sees the first lost answer too.
    for (const task of tasks) this.metrics.pollAnswersLost.inc({ task: task.key }, 0);
    if (tasks.length > 0 && this.#planner!.paceExceedsMaxInterval(this.#clock.now())) {
      this.#logger.warn(
        {
          tasks: tasks.length,
          idleIntervalSeconds: Math.round(this.#planner!.idleIntervalMs(this.#clock.now()) / 1000),
          maxPollIntervalSeconds: Math.round(this.#config.scheduler.maxPollIntervalMs / 1000),
        },
        "the month's budget cannot poll every task within DF_MAX_POLL_INTERVAL_MS; the budget wins " +
          '(raise DF_BUDGET_PER_MONTH, serve fewer tasks, or raise the interval)',
      );
    }
  }

  async #refreshLoop(): Promise<void> {
    const signal = this.#pollStop.signal;
    while (!signal.aborted) {
      try {
        const overloaded = this.#planner!.overloaded(this.#clock.now());
        await this.#clock.sleep(
          taskRefreshIntervalMs(this.#config, this.#everyHandlerServed, overloaded),
          signal,
        );
        const match = await this.#registry!.refresh(signal);
        this.#everyHandlerServed = match.missing.length === 0;
        this.#planTasks();
        this.#withoutTask = match.missing;
        this.metrics.observeTaskMatch(match.registered.length, match.missing);
      } catch (error) {
        if (signal.aborted) return;
        this.#logger.warn({ err: error as Error }, 'task list refresh failed; keeping the current tasks');
      }
    }
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

  #pipelineObserver(): PipelineObserver {
    const m = this.metrics;
    // Outcome instants by execution id, for the report latency; removed once the report ends.
    const finishedAt = new Map<string, number>();
    return {
      resumed: () => m.inFlight.inc(),
      claimed: (task, execution) => {
        m.inFlight.inc();
        const created = Date.parse(execution.createdAt);
        if (Number.isFinite(created)) {
          m.pickupLatency.observe({ task }, Math.max(0, this.#clock.now() - created) / 1000);
        }
      },
      finished: (task, executionId, outcome) => {
        m.executions.inc({ task, outcome: outcome.status });
        m.handlerDuration.observe({ task, outcome: outcome.status }, outcome.durationMs / 1000);
        m.attempts.observe({ task }, outcome.attempts);
        finishedAt.set(executionId, this.#clock.now());
      },
      reported: (task, executionId, result, attempts) => {
        m.inFlight.dec();
        m.reports.inc({ task, result });
        m.reportAttempts.observe({ task }, attempts);
        const at = finishedAt.get(executionId);
        finishedAt.delete(executionId);
        if (at !== undefined && result === 'delivered') {
          m.reportLatency.observe({ task }, (this.#clock.now() - at) / 1000);
        }
        m.journalPending.set(this.#journal?.counts.pending ?? 0);
        m.journalDeadLettered.set(this.#journal?.counts.deadLettered ?? 0);
      },
    };
  }
}
