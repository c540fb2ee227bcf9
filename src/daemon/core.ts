// The daemon core: handlers, service client, task list, execution pipeline and poll planner, wired once, with
// one lifecycle (start fails fast, stop drains). A mode puts in what differs: where claims and the budget's
// usage are kept (the state folder, Redis, memory) and who claims (this process's scheduler, the cluster's
// coordinator). Standalone (worker.ts), clustered (cluster/clustered-worker.ts) and the month replay
// (replay/replay.ts) are this core with a mode; what happens is emitted on `events` (events.ts).
import type { Logger } from 'pino';
import type { RequestGate, ResponseEvent, ServiceClient } from '../api/client.ts';
import type { Budget } from '../budget/budget.ts';
import { systemClock, type Clock } from '../clock/clock.ts';
import type { WorkerConfig } from '../config/schema.ts';
import type { TaskModule } from '../handlers/define-task.ts';
import { sandboxFromConfig, type Sandbox } from '../sandbox/index.ts';
import type { PollPlanner } from '../scheduler/poll-planner.ts';
import { Reporter } from '../scheduler/reporter.ts';
import { WorkerMetrics, type PacingSnapshot } from '../telemetry/metrics.ts';
import type { Readiness, WorkerOptions, WorkerState } from './contract.ts';
import { summariseError } from '../runner/errors.ts';
import { splitInput } from '../runner/input.ts';
import type { TraceSlot } from '../tracing/trace-slot.ts';
import { WorkerEvents, type WorkerEventMap } from './events.ts';
import { ExecutionPipeline, type ExecutionJournal, type PipelineObserver } from './execution-pipeline.ts';
import { backoffFromConfig, clientFromConfig, plannerFromConfig } from './service-wiring.ts';
import { KeyRotation } from './key-rotation.ts';
import { TaskList, type TaskListOptions } from './task-list.ts';
import { TaskRegistry } from './task-registry.ts';
import { listenForTelemetry } from './telemetry-listener.ts';
import { listenForSuccessors } from './successor-listener.ts';
import { SuccessorPacing } from '../scheduler/successor-pacing.ts';

/** What every request passes and the metrics read: the process's Budget, or the cluster's shared windows. */
export type BudgetGate = RequestGate & Pick<Budget, 'gateFor' | 'snapshot'>;

/** What a mode may use of the core from its start on. */
export interface CoreHandle {
  readonly config: WorkerConfig;
  readonly logger: Logger;
  readonly clock: Clock;
  readonly events: WorkerEvents;
  readonly metrics: WorkerMetrics;
  /** Aborted when stop() begins: no new poll. */
  readonly pollSignal: AbortSignal;
  /** Aborted when the grace period ends: running handlers are stopped and reported FAILED. */
  readonly handlerSignal: AbortSignal;
  /** Aborted when the daemon must exit: report retries stop. */
  readonly reportSignal: AbortSignal;
  readonly state: WorkerState;
  stop(): Promise<void>;
  /** Ends report retries now (a stop that cannot wait longer): what is not reported stays journaled. */
  abortReports(reason: string): void;
}

/** What the mode opened: the budget, and where claims are kept until reported. */
export interface ModeState<G extends BudgetGate> {
  /** Orders and paces this process's requests; the poll planner reads it. */
  budget: Budget;
  /** What every request passes: `budget`, or the cluster's shared windows around it. */
  gate: G;
  journal: ExecutionJournal;
  /** Records owed a report and dead letters, read after each report (standalone's journal). */
  journalCounts?: () => { pending: number; deadLettered: number };
  /** The poll planner's arrival profile is kept in the state folder; otherwise in memory only. */
  keepProfile: boolean;
  exclusive?: TaskListOptions['exclusive'];
  /** Asked before each report leaves: false while this process may no longer own the execution (clustered). */
  fence?: (executionId: string) => Promise<boolean>;
}

/** The core's parts, built: what a mode claims with. */
export interface CoreParts<G extends BudgetGate> extends ModeState<G> {
  client: ServiceClient;
  registry: TaskRegistry;
  taskList: TaskList;
  pipeline: ExecutionPipeline;
  planner: PollPlanner & { save: () => Promise<void> };
  sandbox: Sandbox;
}

/** Who claims: this process's scheduler, or the cluster's coordinator. */
export interface Claimer {
  /** Loops that end once polling stops (the core adds the task list's). */
  loops: Promise<unknown>[];
  wake(taskKey?: string): number;
  /** Another key is in use (DF_API_KEY_FILE changed): while the last was refused, try it now. */
  keyChanged?(): void;
  /** False while the service refuses the key; undefined before a poll was answered. */
  readonly authorized: boolean | undefined;
  /** Executions this process runs now (logged as stop() begins). */
  readonly inFlight?: number;
  /** After polling stopped: resolves once no claim is still on its way (the mode bounds the wait). */
  settleClaims?(): Promise<void>;
  /** Resolves once every execution this process holds has ended; may be called more than once. */
  drained(): Promise<void>;
}

export interface DaemonMode<G extends BudgetGate> {
  /** In the start and stop log lines: 'standalone', 'clustered'. */
  readonly label: string;
  /** This replica's id (clustered mode): traces name the replica that ran an execution. */
  readonly replicaId?: string;
  /** Opens where claims and the budget's usage are kept; called once the handlers are loaded. */
  open(core: CoreHandle): Promise<ModeState<G>>;
  /** Starts claiming, once the task list was read and the pipeline built. */
  claim(core: CoreHandle, parts: CoreParts<G>): Promise<Claimer>;
  /** Checks of /readyz besides the core's. */
  checks(): Readiness['checks'];
  /** Once every execution ended and the handler workers are gone: gives back what the mode holds. */
  close(): Promise<void>;
  /** Fields of the 'df-worker stopped' log line. */
  stoppedFields?(): Record<string, unknown>;
}

/** True when `ms` ran out on `clock` before `promise` settled (either way). */
export async function expires(clock: Clock, promise: Promise<unknown>, ms: number): Promise<boolean> {
  const timer = new AbortController();
  const expired = clock.sleep(ms, timer.signal).then(
    () => true,
    () => false,
  );
  const settled = promise.then(
    () => false,
    () => false,
  );
  const result = await Promise.race([settled, expired]);
  timer.abort();
  return result;
}

export class DaemonCore<G extends BudgetGate> {
  readonly metrics: WorkerMetrics;
  readonly events: WorkerEvents;
  protected readonly config: WorkerConfig;
  protected readonly logger: Logger;
  protected readonly clock: Clock;
  readonly #options: WorkerOptions;
  readonly #mode: DaemonMode<G>;
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

  constructor(options: WorkerOptions, mode: DaemonMode<G>, logger: Logger = options.logger) {
    this.#options = options;
    this.#mode = mode;
    this.config = options.config;
    this.logger = logger;
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
    this.#keys = new KeyRotation(this.config, this.logger, this.events);
    options.tracing?.listen(this.events, mode.replicaId === undefined ? {} : { replica: mode.replicaId });
    const state = () => this.#state;
    this.#handle = {
      config: this.config,
      logger: this.logger,
      clock: this.clock,
      events: this.events,
      metrics: this.metrics,
      pollSignal: this.#pollStop.signal,
      handlerSignal: this.#handlerStop.signal,
      reportSignal: this.#reportStop.signal,
      get state() {
        return state();
      },
      stop: () => this.stop(),
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

  /**
   * Loads handlers, opens the mode's state, reads the task list and starts claiming. A stop() meanwhile ends
   * the start early; it then resolves without polling (stop() drains what was begun).
   */
  async start(): Promise<void> {
    if (this.#state !== 'new')
      throw new Error(`${this.constructor.name}.start() called in state ${this.#state}`);
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
      observer: {
        workerStarted: () => events.emit('handlerWorker', { started: true }),
        workerGone: (reason) => events.emit('handlerWorker', { started: false, reason }),
      },
    });
    parts.sandbox = sandbox;
    const handlers =
      this.#handlers ??
      (await (this.#options.handlersLoading ?? sandbox.loadHandlers(config.handlers.dir, logger)));
    this.#handlers = handlers;
    logger.info({ handlers: [...handlers.keys()], dir: config.handlers.dir }, 'handlers loaded');

    const opened = await this.#mode.open(this.#handle);
    Object.assign(parts, opened);
    if (this.#pollStop.signal.aborted) return;
    const client = clientFromConfig(
      config,
      opened.gate,
      (e) => events.emit('response', e),
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
      observer: pipelineEvents(events, opened.journalCounts, (task) => this.wake(task)),
      host: sandbox.host,
      // Handlers' own calls share the key's budget below reports and above idle polls; its 429 pauses all.
      service: client.withGate(opened.gate.gateFor('handler')),
      redact: sandbox.redact,
      maxCrashesPerExecution: config.journal.maxCrashesPerExecution,
      ...(opened.fence ? { fence: opened.fence } : {}),
    });
    const successors = config.scheduler.pipelinePacing
      ? new SuccessorPacing(clock, { reportsSeenHere: this.#mode.label !== 'clustered' })
      : undefined;
    const planner = await plannerFromConfig(config, opened.budget, {
      inMemory: !opened.keepProfile,
      logger,
      ...(successors ? { successors } : {}),
    });
    parts.planner = planner;
    if (successors) {
      const served = registry.tasks.map((t) => t.task.key);
      const pipeline = { source: client, pacing: successors, planner, logger, served };
      await listenForSuccessors(events, { ...pipeline, signal: this.#pollStop.signal });
    }
    taskList.plan(planner);
    if (this.#pollStop.signal.aborted) return;

    const claimer = await this.#mode.claim(this.#handle, parts as CoreParts<G>);
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
        mode: this.#mode.label,
      },
      this.#mode.label === 'clustered' ? 'df-worker started (clustered)' : 'df-worker started',
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
    if (this.#state !== 'running') throw new Error(`Worker.replaceHandlers() called in state ${this.#state}`);
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
      ...this.#mode.checks(),
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
    await this.#mode.close();
    await this.#parts.client?.close();
    this.#keys.close();
    // Every execution's spans have ended by now; the last of them leave within the flush's bound.
    await this.#options.tracing?.flush();
    this.#state = 'stopped';
    logger.info({ ...this.#mode.stoppedFields?.() }, 'df-worker stopped');
  }
}

const NO_SECRETS: readonly string[] = [];

/** The pipeline's steps as core events; the journal's counts follow each report. */
function pipelineEvents(
  events: WorkerEvents,
  journalCounts: (() => { pending: number; deadLettered: number }) | undefined,
  pollNow: (taskKey: string) => void,
): PipelineObserver {
  const claim = (event: Omit<WorkerEventMap['claim'][0], 'trace'>): TraceSlot => {
    const trace: TraceSlot = {};
    events.emit('claim', { ...event, trace });
    return trace;
  };
  return {
    claimed: (task, execution, origin) =>
      claim({
        task,
        executionId: execution.id,
        createdAt: execution.createdAt,
        resumed: false,
        ...jobOf(execution.input),
        ...(origin ? { origin } : {}),
      }),
    resumed: (task, entry, origin) =>
      claim({
        task,
        executionId: entry.executionId,
        resumed: true,
        ...jobOf(entry.input),
        ...(origin ? { origin } : {}),
      }),
    attempt: (task, executionId, event) => events.emit('attempt', { task, executionId, ...event }),
    // The handlers' requests are observed one by one only for a listener (traces): none, no cost.
    ...(events.listenerCount('serviceCall') > 0
      ? {
          serviceCall: (task: string, executionId: string, attempt: number, event: ResponseEvent) =>
            events.emit('serviceCall', { task, executionId, attempt, ...event }),
        }
      : {}),
    reportRetry: (task, executionId, attempt, error) => {
      const { errorName, message } = summariseError(error);
      events.emit('reportRetry', { task, executionId, attempt, error: { name: errorName, message } });
    },
    finished: (task, executionId, outcome) => events.emit('outcome', { task, executionId, outcome }),
    fenced: (task, executionId) => events.emit('fenced', { request: 'report', task, executionId }),
    refused: (task, executionId, answer) => events.emit('reportRefused', { task, executionId, ...answer }),
    redelivered: (task, executionId) => events.emit('redelivered', { task, executionId, where: 'pipeline' }),
    reported: (task, executionId, result, attempts) => {
      events.emit('report', { task, executionId, result, attempts });
      if (journalCounts) events.emit('journal', journalCounts());
      // A refused report most often means the service took the execution back (its response timeout passed)
      // and queued the work again: poll for it now, not at the next idle poll. Only once its dead letter is
      // written: until then the execution is still owed, and a poll handing its id out again would be taken
      // for a redelivery and dropped (the pipeline lets go of it before any poll's answer can arrive).
      if (result === 'dead-lettered') pollNow(task);
    },
  };
}

/** The claim event's `jobId`: the service's `input.context.jobId`, when it is a string. */
function jobOf(input: unknown): { jobId?: string } {
  const jobId = splitInput(input).job.jobId;
  return typeof jobId === 'string' ? { jobId } : {};
}
