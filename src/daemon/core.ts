// The daemon core: handlers, service client, task list, execution pipeline and poll planner, wired once, with
// one lifecycle (run(): start fails fast, the poll loop claims, stop drains). A mode, composed into the core,
// puts in what differs: where claims and the budget's usage are kept (the state folder, Redis, memory) and who
// runs the poll loop (this process, or the cluster's coordinator). Standalone (standalone/standalone-mode.ts),
// clustered (clustered/clustered-mode.ts) and the month replay (replay/replay.ts) are this core with a mode;
// what happens is emitted on `events` (events/worker-events.ts).
import type { Logger } from 'pino';
import type { ServiceClient } from '../api/client.ts';
import { systemClock, type Clock } from '../clock/clock.ts';
import { expires } from '../clock/expires.ts';
import type { WorkerConfig } from '../config/schema.ts';
import type { TaskModule } from '../handlers/define-task.ts';
import { sandboxFromConfig } from '../sandbox/index.ts';
import { EXIT_OK } from '../errors/exit-codes.ts';
import { Reporter } from '../reports/reporter.ts';
import { Scheduler, type SchedulerOptions } from '../scheduler/scheduler.ts';
import { WorkerMetrics, type PacingSnapshot } from '../telemetry/metrics.ts';
import type { Readiness, WorkerOptions, WorkerState } from './contract.ts';
import { NO_HOOKS, type WorkerHooks } from '../events/hooks.ts';
import { WorkerEvents } from '../events/worker-events.ts';
import { ExecutionPipeline } from './execution-pipeline.ts';
import { plannerFromConfig } from './planner-from-config.ts';
import { backoffFromConfig, clientFromConfig } from './service-wiring.ts';
import { KeyRotation } from './key-rotation.ts';
import type { BudgetGate, Claimer, CoreHandle, CoreParts, DaemonMode, PollLoopFactory } from './mode.ts';
import { TaskList } from './task-list.ts';
import { TaskRegistry } from './task-registry.ts';
import { listenForTelemetry } from './telemetry-listener.ts';
import { logEvents } from './event-log.ts';
import { listenForSuccessors } from './successor-listener.ts';
import { SuccessorPacing } from '../scheduler/successor-pacing.ts';
import { listIntervalFor } from '../scheduler/job-run-watch.ts';

/**
 * The poll loop every mode runs, on the core's clock, logger and events: standalone runs one for this process,
 * the clustered coordinator one per lease term.
 */
export function pollLoopOn(
  core: Pick<SchedulerOptions, 'clock' | 'logger' | 'unauthorizedRetryMs'> & { events: WorkerEvents },
): PollLoopFactory {
  return (options) =>
    new Scheduler({
      ...options,
      clock: core.clock,
      logger: core.logger,
      unauthorizedRetryMs: core.unauthorizedRetryMs,
      events: core.events,
    });
}

/**
 * The daemon: one core, one mode (`new DaemonCore(options, new StandaloneMode())`, or the factories
 * standaloneDaemon() and clusteredDaemon()). run() is its whole life; start() and stop() its two halves.
 */
export class DaemonCore<G extends BudgetGate, M extends DaemonMode<G> = DaemonMode<G>> {
  readonly metrics: WorkerMetrics;
  readonly events: WorkerEvents;
  readonly config: WorkerConfig;
  readonly logger: Logger;
  readonly clock: Clock;
  /** What differs between standalone and clustered (and what only one of them offers, e.g. dead letters). */
  readonly mode: M;
  /** What listeners contribute (tracing's context and headers); no-ops without tracing. */
  readonly hooks: WorkerHooks;
  readonly #options: WorkerOptions;
  readonly #exited = Promise.withResolvers<number>();
  #exitCode: number = EXIT_OK;
  #state: WorkerState = 'new';
  #handlers: ReadonlyMap<string, TaskModule> | undefined;
  #parts: Partial<CoreParts<G>> = {};
  #claimer: Claimer | undefined;
  readonly #pollStop = new AbortController();
  readonly #handlerStop = new AbortController();
  readonly #reportStop = new AbortController();
  #loops: Promise<unknown>[] = [];
  #starting: Promise<void> | undefined;
  #stopping: Promise<void> | undefined;
  readonly #handle: CoreHandle;
  readonly #keys: KeyRotation;

  constructor(options: WorkerOptions, mode: M) {
    this.#options = options;
    this.mode = mode;
    this.config = options.config;
    this.logger =
      mode.replicaId === undefined ? options.logger : options.logger.child({ replica: mode.replicaId });
    this.clock = options.clock ?? systemClock;
    this.#handlers = options.handlers;
    this.events = options.events ?? new WorkerEvents();
    // /metrics may be scraped while the worker starts, before the budget exists.
    this.metrics =
      options.metrics ??
      new WorkerMetrics({
        budget: () => this.#parts.gate?.snapshot(),
        ready: () => this.readiness().ready,
        keyRefused: () => this.#claimer?.authorized === false,
        pacing: () => this.#pacing(),
      });
    listenForTelemetry(
      this.events,
      this.metrics,
      this.logger,
      this.clock,
      () => this.#parts.client?.serviceClock,
    );
    logEvents(this.events, this.logger);
    this.#keys = new KeyRotation(this.config, this.logger, this.events);
    this.hooks =
      options.tracing?.listen(this.events, mode.replicaId === undefined ? {} : { replica: mode.replicaId }) ??
      NO_HOOKS;
    mode.registerMetrics?.(this.metrics, this.events);
    const state = () => this.#state;
    this.#handle = {
      config: this.config,
      logger: this.logger,
      clock: this.clock,
      events: this.events,
      hooks: this.hooks,
      metrics: this.metrics,
      pollSignal: this.#pollStop.signal,
      handlerSignal: this.#handlerStop.signal,
      reportSignal: this.#reportStop.signal,
      get state() {
        return state();
      },
      // A refused key is retried at the slowest back-off: an operator has to act anyway.
      pollLoop: pollLoopOn({
        clock: this.clock,
        logger: this.logger,
        events: this.events,
        unauthorizedRetryMs: this.config.scheduler.errorBackoffMaxMs,
      }),
      stop: (exitCode: number = EXIT_OK) => {
        if (this.#stopping === undefined) this.#exitCode = exitCode;
        return this.stop();
      },
      abortReports: (reason) => this.#reportStop.abort(new Error(reason)),
    };
  }

  get state(): WorkerState {
    return this.#state;
  }

  /** The key's budget as requests pass it (undefined until start() opened it). */
  get budget(): G | undefined {
    return this.#parts.gate;
  }

  get client(): ServiceClient | undefined {
    return this.#parts.client;
  }

  /** This replica's id (clustered mode). */
  get replicaId(): string | undefined {
    return this.mode.replicaId;
  }

  /** Resolves with the process's exit code once the daemon has stopped: 0, or the mode's own (see CoreHandle). */
  get exited(): Promise<number> {
    return this.#exited.promise;
  }

  /**
   * The daemon's whole life: start() (rejects as it does), then the mode's poll loop claims until stop() (a
   * signal's) or the mode stops on its own, then the drain; resolves with the process's exit code. `started`
   * is called once start() has resolved.
   */
  async run(started?: () => void): Promise<number> {
    await this.start();
    started?.();
    return this.exited;
  }

  /**
   * Loads handlers, opens the mode's state, reads the task list and starts claiming. A stop() meanwhile ends
   * the start early; it then resolves without polling (stop() drains what was begun).
   */
  async start(): Promise<void> {
    if (this.#state !== 'new') throw new Error(`DaemonCore.start() called in state ${this.#state}`);
    this.#state = 'starting';
    this.#starting = this.#start();
    try {
      await this.#starting;
    } catch (error) {
      if (this.#pollStop.signal.aborted) return;
      throw error;
    }
  }

  async #start(): Promise<void> {
    const { config, logger, clock, events } = this;
    const parts = this.#parts;
    const sandbox = sandboxFromConfig(config, logger, {
      laterSecrets: () => this.#keys.source?.held?.() ?? NO_SECRETS,
      events,
    });
    parts.sandbox = sandbox;
    const handlers =
      this.#handlers ??
      (await (this.#options.handlersLoading ?? sandbox.loadHandlers(config.handlers.dir, logger)));
    this.#handlers = handlers;
    logger.info({ handlers: [...handlers.keys()], dir: config.handlers.dir }, 'handlers loaded');

    const opened = await this.mode.open(this.#handle);
    Object.assign(parts, opened);
    if (this.#pollStop.signal.aborted) return;
    const client = clientFromConfig(
      config,
      opened.gate,
      events,
      this.#options.transport,
      clock,
      this.#keys.source,
    );
    parts.client = client;
    await this.#keys.start(() => this.#claimer?.keyChanged?.());
    const registry = new TaskRegistry({
      handlers,
      client,
      logger,
      sync: config.tasks.sync,
      ...(this.#options.taskSyncCommand === undefined ? {} : { syncCommand: this.#options.taskSyncCommand }),
    });
    parts.registry = registry;
    const taskList = new TaskList({
      registry,
      config,
      logger,
      clock,
      events,
      ...(opened.exclusive ? { exclusive: opened.exclusive } : {}),
    });
    parts.taskList = taskList;
    await taskList.first(this.#pollStop.signal);

    const reporter = new Reporter({ client, clock, logger, backoff: backoffFromConfig(config) });
    parts.pipeline = new ExecutionPipeline({
      journal: opened.journal,
      reporter,
      clock,
      logger,
      defaultTimeoutMs: config.handlers.timeoutMs,
      backoff: backoffFromConfig(config),
      lookup: (id) => registry.byId(id),
      handlerSignal: this.#handlerStop.signal,
      reportSignal: this.#reportStop.signal,
      events,
      hooks: this.hooks,
      ...(opened.journalCounts ? { journalCounts: opened.journalCounts } : {}),
      host: sandbox.host,
      // Handlers' own calls share the key's budget below reports and above idle polls; its 429 pauses all.
      service: client.withGate(opened.gate.gateFor('handler')),
      redact: sandbox.redact,
      maxCrashesPerExecution: config.journal.maxCrashesPerExecution,
      ...(opened.fence ? { fence: opened.fence } : {}),
    });
    const successors = config.scheduler.pipelinePacing ? new SuccessorPacing(clock) : undefined;
    const { planner, saveProfile } = await plannerFromConfig(config, opened.budget, {
      inMemory: !opened.keepProfile,
      logger,
      ...(successors ? { successors } : {}),
    });
    parts.planner = planner;
    parts.saveProfile = saveProfile;
    // A refused report most often means the service took the execution back (its response timeout passed)
    // and queued the work again: poll for it now, not at the next idle poll. Only once its dead letter is
    // written (the report event follows it): until then the execution is still owed, and a poll handing its
    // id out again would be taken for a redelivery and dropped.
    events.on('report', ({ task, result }) => {
      if (result === 'dead-lettered') this.wake(task);
    });
    if (successors) {
      const served = registry.tasks.map((t) => t.task.key);
      const polling = () => this.mode.polling ?? true;
      const pipeline = { source: client, pacing: successors, planner, logger, served, polling };
      const everyMs = listIntervalFor(config.budget.perMonth);
      const jobRuns = config.scheduler.pipelineJobList ? { source: client, everyMs, clock } : undefined;
      const recheck = () => this.#claimer?.recheck?.();
      await listenForSuccessors(events, { ...pipeline, jobRuns, recheck, signal: this.#pollStop.signal });
    }
    taskList.plan(planner);
    if (this.#pollStop.signal.aborted) return;

    const claimer = await this.mode.claim(this.#handle, parts as CoreParts<G>);
    this.#claimer = claimer;
    this.#state = 'running';
    taskList.warnOfCostlyRefresh();
    this.#loops = [...claimer.loops, taskList.refreshLoop(this.#pollStop.signal)];
    logger.info(
      {
        tasks: registry.tasks.map((t) => t.task.key),
        concurrency: config.concurrency,
        budget: config.budget,
        idlePollIntervalSeconds: Math.round(planner.idleIntervalMs(clock.monotonic()) / 1000),
        mode: this.mode.label,
      },
      this.mode.label === 'clustered' ? 'df-worker started (clustered)' : 'df-worker started',
    );
  }

  #pacing(): PacingSnapshot | undefined {
    const planner = this.#parts.planner;
    if (!planner) return undefined;
    const now = this.clock.monotonic();
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
    if (this.#state !== 'running')
      throw new Error(`DaemonCore.replaceHandlers() called in state ${this.#state}`);
    this.#handlers = handlers;
    this.#parts.registry!.setHandlers(handlers);
    this.#parts.sandbox?.retire();
    await this.#parts.taskList!.refresh(this.#pollStop.signal);
    this.wake();
  }

  /** Polls one task (or all) now, within budget. Returns how many tasks matched (0 off the coordinator). */
  wake(taskKey?: string): number {
    return this.#claimer?.wake(taskKey) ?? 0;
  }

  readiness(): Readiness {
    const authorized = this.#claimer?.authorized;
    const checks: Readiness['checks'] = {
      started: this.#state === 'running' ? { ok: true } : { ok: false, reason: `worker is ${this.#state}` },
      handlers: this.#handlers ? { ok: true } : { ok: false, reason: 'handlers not loaded' },
      service:
        this.#parts.taskList?.answered === true
          ? authorized === false
            ? { ok: false, reason: this.#keys.refusedReason() }
            : { ok: true }
          : { ok: false, reason: 'the service has not answered yet' },
      ...this.mode.checks(),
    };
    const tasks = {
      served: this.#parts.registry?.tasks.map((t) => t.task.key) ?? [],
      withoutTask: this.#parts.taskList?.withoutTask ?? [],
    };
    return { ready: Object.values(checks).every((c) => c.ok), checks, tasks };
  }

  /**
   * Graceful stop: no new polls at once; running handlers get the grace period, then are aborted (and
   * reported FAILED); pending reports get a flush window; what cannot be reported stays in the journal.
   */
  stop(): Promise<void> {
    this.#stopping ??= this.#stop();
    return this.#stopping;
  }

  async #stop(): Promise<void> {
    const { logger, clock } = this;
    const graceMs = this.config.shutdownGraceMs;
    this.#state = 'stopping';
    this.#pollStop.abort(new Error('worker stopping'));
    await this.#claimer?.settleClaims?.();
    await Promise.allSettled(this.#loops);
    // start() ends soon after the stop signal; what it began is drained below only once it has.
    await Promise.allSettled([this.#starting]);
    const claimer = this.#claimer;
    if (claimer) {
      logger.info({ inFlight: claimer.inFlight, graceMs }, 'stopping: waiting for running executions');
      if (await expires(clock, claimer.drained(), graceMs)) {
        logger.warn('grace period over: aborting running handlers; they are reported FAILED');
        this.#handlerStop.abort(new Error('shutdown grace period over'));
        // Reports of aborted handlers still get a short window to reach the service.
        if (await expires(clock, claimer.drained(), Math.max(5_000, graceMs / 2))) {
          this.#reportStop.abort(new Error('shutdown flush window over'));
        }
        await claimer.drained().catch(() => undefined);
      }
    }
    this.#handlerStop.abort(new Error('worker stopped'));
    this.#reportStop.abort(new Error('worker stopped'));
    await this.#parts.sandbox?.close();
    await this.mode.close();
    await this.#parts.client?.close();
    this.#keys.close();
    // Every execution's spans have ended by now; the last of them leave within the flush's bound.
    await this.#options.tracing?.flush();
    this.#state = 'stopped';
    logger.info({ ...this.mode.stoppedFields?.() }, 'df-worker stopped');
    this.#exited.resolve(this.#exitCode);
  }
}

const NO_SECRETS: readonly string[] = [];
