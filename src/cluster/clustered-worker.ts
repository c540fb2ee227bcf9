// Clustered mode's daemon (DF_REDIS_URL set): the same parts as the standalone Worker (handler host, budget,
// client, task list, planner, scheduler, execution pipeline), wired around Redis. Every replica runs handlers
// from the cluster's queue; the one holding the coordinator lease also polls, and adds each claimed execution
// to the queue before anything else. Loaded only in clustered mode (dynamic import), so standalone pays nothing.
import { Queue, Worker as QueueWorker } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { ServiceClient } from '../api/client.ts';
import { memoryBudgetStore } from '../budget/store.ts';
import { systemClock, type Clock } from '../clock/clock.ts';
import type { WorkerConfig } from '../config/schema.ts';
import { ExecutionPipeline } from '../daemon/execution-pipeline.ts';
import { pipelineMetrics } from '../daemon/pipeline-metrics.ts';
import {
  backoffFromConfig,
  budgetFromConfig,
  logRateLimitPause,
  clientFromConfig,
  plannerFromConfig,
} from '../daemon/service-wiring.ts';
import { TaskList } from '../daemon/task-list.ts';
import { TaskRegistry } from '../daemon/task-registry.ts';
import { commonReadinessChecks, type Readiness, type WorkerOptions } from '../daemon/worker.ts';
import type { TaskModule } from '../handlers/define-task.ts';
import { sandboxFromConfig, type Sandbox } from '../sandbox/index.ts';
import type { PollPlanner } from '../scheduler/poll-planner.ts';
import { Reporter } from '../scheduler/reporter.ts';
import { WorkerMetrics } from '../telemetry/metrics.ts';
import { registerClusterMetrics, type QueueCounts } from './cluster-metrics.ts';
import { CoordinatorLease } from './coordinator-lease.ts';
import { Coordinator } from './coordinator.ts';
import { executionProcessor } from './execution-processor.ts';
import { QueueJournal, type ExecutionJobData } from './queue-journal.ts';
import {
  bullConnectionOptions,
  clusterKeys,
  connectRedis,
  REDIS_COMMAND_TIMEOUT_MS,
  redisUrlForLogs,
  replicaIdFromConfig,
  type ClusterKeys,
} from './redis.ts';
import { HEARTBEAT_MS, Replicas } from './replicas.ts';
import { SharedBudget } from './shared-budget.ts';

/**
 * A job's lock lasts this long unless its replica renews it (every half of it): a replica killed mid-handler
 * has its execution taken up again by another within about this time plus STALLED_CHECK_MS.
 */
export const LOCK_DURATION_MS = 5_000;
export const STALLED_CHECK_MS = 2_000;

/** How long a replica may hold the task-sync lock (DF_TASK_SYNC), in ms. */
const TASK_SYNC_LOCK_MS = 60_000;

type State = 'new' | 'starting' | 'running' | 'stopping' | 'stopped';

export class ClusteredWorker {
  readonly metrics: WorkerMetrics;
  readonly replicaId: string;
  readonly #config: WorkerConfig;
  readonly #logger: Logger;
  readonly #clock: Clock;
  readonly #keys: ClusterKeys;
  #state: State = 'new';
  #handlers: ReadonlyMap<string, TaskModule> | undefined;
  #handlersLoading: Promise<ReadonlyMap<string, TaskModule>> | undefined;
  #sandbox: Sandbox | undefined;
  #redis: Redis | undefined;
  #budget: SharedBudget | undefined;
  #client: ServiceClient | undefined;
  #taskList: TaskList | undefined;
  #planner: PollPlanner | undefined;
  #pipeline: ExecutionPipeline | undefined;
  #queue: Queue<ExecutionJobData> | undefined;
  #queueWorker: QueueWorker<ExecutionJobData> | undefined;
  #replicas: Replicas | undefined;
  readonly #journal = new QueueJournal();
  #coordinator: Coordinator | undefined;
  #alive = { count: 0, capacity: 0 };
  #queueCounts: QueueCounts | undefined;
  /** Whether the last heartbeat reached Redis; undefined before the first. */
  #heartbeatOk: boolean | undefined;
  readonly #pollStop = new AbortController();
  readonly #handlerStop = new AbortController();
  readonly #reportStop = new AbortController();
  #loops: Promise<unknown>[] = [];
  /** The coordinator's lease loop: ends (term over, lease given back) once stopping. */
  #coordinatorRun: Promise<void> | undefined;
  #starting: Promise<void> | undefined;
  #stopping: Promise<void> | undefined;

  constructor(options: WorkerOptions) {
    this.#config = options.config;
    this.#clock = options.clock ?? systemClock;
    this.#handlers = options.handlers;
    this.#handlersLoading = options.handlersLoading;
    this.replicaId = replicaIdFromConfig(options.config);
    this.#logger = options.logger.child({ replica: this.replicaId });
    this.#keys = clusterKeys(options.config.api.key);
    this.metrics =
      options.metrics ??
      new WorkerMetrics({
        budget: () => this.#budget?.snapshot(),
        ready: () => this.readiness().ready,
        pacing: () => this.#pacing(),
      });
    registerClusterMetrics(this.metrics.registry, {
      replica: this.replicaId,
      coordinator: () => this.coordinating,
      queue: () => this.#queueCounts,
      replicas: () => this.#alive.count,
    });
  }

  get state(): State {
    return this.#state;
  }

  /** True while this replica holds the coordinator lease (and polls). */
  get coordinating(): boolean {
    return this.#coordinator?.coordinating ?? false;
  }

  get budget(): SharedBudget | undefined {
    return this.#budget;
  }

  async start(): Promise<void> {
    if (this.#state !== 'new') throw new Error(`ClusteredWorker.start() called in state ${this.#state}`);
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
    const config = this.#config;
    const logger = this.#logger;
    const clock = this.#clock;
    const sandbox = sandboxFromConfig(config, logger, { observer: this.metrics.handlerWorkerObserver() });
    this.#sandbox = sandbox;
    const handlers =
      this.#handlers ?? (await (this.#handlersLoading ?? sandbox.loadHandlers(config.handlers.dir, logger)));
    this.#handlers = handlers;
    logger.info({ handlers: [...handlers.keys()], dir: config.handlers.dir }, 'handlers loaded');

    logger.info({ redis: redisUrlForLogs(config.cluster.redisUrl) }, 'clustered mode: connecting to Redis');
    const redis = connectRedis(config.cluster.redisUrl);
    this.#redis = redis;
    await this.#connected(redis);
    if (this.#pollStop.signal.aborted) return;

    // The local budget orders this replica's requests and paces; Redis holds the key's windows and month.
    const local = budgetFromConfig(
      config,
      clock,
      2 * config.concurrency,
      memoryBudgetStore(),
      logRateLimitPause(logger),
    );
    await local.load();
    this.#budget = new SharedBudget({
      local,
      redis,
      keys: this.#keys,
      clock,
      safetyMarginMs: config.budget.safetyMarginMs,
      replicaId: this.replicaId,
      logger,
    });
    await this.#budget.load();
    const month = local.month();
    logger.info({ month: month.key, used: month.used, limit: month.limit }, 'month budget usage (cluster)');

    this.#client = clientFromConfig(config, this.#budget, (e) =>
      this.metrics.observeResponse(e.operation, e.status, e.durationMs),
    );
    const registry = new TaskRegistry({ handlers, client: this.#client, logger, sync: config.tasks.sync });
    // Long enough for a task list read that waits for budget; a replica that dies holding it delays the others.
    const syncLock = new CoordinatorLease(redis, this.#keys.taskSync, this.replicaId, TASK_SYNC_LOCK_MS);
    this.#taskList = new TaskList({
      registry,
      config,
      logger,
      clock,
      metrics: this.metrics,
      ...(config.tasks.sync ? { exclusive: (read) => alone(syncLock, clock, read) } : {}),
    });
    await this.#taskList.first(this.#pollStop.signal);

    const reporter = new Reporter({
      client: this.#client,
      clock,
      logger,
      backoff: backoffFromConfig(config),
    });
    this.#pipeline = new ExecutionPipeline({
      journal: this.#journal,
      reporter,
      clock,
      logger,
      defaultTimeoutMs: config.handlers.timeoutMs,
      backoff: backoffFromConfig(config),
      lookup: (id) => registry.byId(id),
      handlerSignal: this.#handlerStop.signal,
      reportSignal: this.#reportStop.signal,
      observer: pipelineMetrics(this.metrics, clock),
      host: sandbox.host,
      service: this.#client.withGate(this.#budget.gateFor('handler')),
      redact: sandbox.redact,
      maxCrashesPerExecution: config.journal.maxCrashesPerExecution,
    });
    // What the planner learns of arrivals is kept in Redis by the coordinators (see Coordinator: profiles).
    this.#planner = await plannerFromConfig(config, local, { inMemory: true, logger });
    this.#taskList.plan(this.#planner);
    if (this.#pollStop.signal.aborted) return;

    const connection = bullConnectionOptions(config.cluster.redisUrl);
    this.#queue = new Queue<ExecutionJobData>(this.#keys.queue, {
      prefix: this.#keys.prefix,
      // Adds fail at once while Redis is away: the coordinator retries them itself.
      connection: {
        ...connection,
        maxRetriesPerRequest: 1,
        enableOfflineQueue: false,
        commandTimeout: REDIS_COMMAND_TIMEOUT_MS,
      },
    });
    this.#queue.on('error', () => undefined);
    const processor = executionProcessor({
      pipeline: this.#pipeline,
      journal: this.#journal,
      metrics: this.metrics,
      replay: config.journal.replay,
      replicaId: this.replicaId,
    });
    this.#queueWorker = new QueueWorker<ExecutionJobData>(this.#keys.queue, processor, {
      prefix: this.#keys.prefix,
      connection,
      concurrency: config.concurrency,
      lockDuration: LOCK_DURATION_MS,
      stalledInterval: STALLED_CHECK_MS,
      // The pipeline fails a poison execution itself, as standalone does, once it has died that many times.
      maxStalledCount: config.journal.maxCrashesPerExecution + 1,
    });
    this.#queueWorker.on('error', (error) => logger.debug({ err: error }, 'queue worker error'));
    this.#coordinator = new Coordinator({
      lease: new CoordinatorLease(redis, this.#keys.lease, this.replicaId),
      queue: this.#queue,
      client: this.#client,
      planner: this.#planner,
      clock,
      logger,
      metrics: this.metrics,
      unauthorizedRetryMs: config.scheduler.errorBackoffMaxMs,
      capacity: () => Math.max(this.#alive.capacity, config.concurrency),
      claimBlocker: () => (redis.status === 'ready' ? undefined : 'Redis is not reachable'),
      exitSignal: this.#reportStop.signal,
      profiles: {
        load: async () => {
          const text = await redis.get(this.#keys.profile);
          return text === null ? undefined : (JSON.parse(text) as unknown);
        },
        save: async (state) => {
          await redis.set(this.#keys.profile, JSON.stringify(state));
        },
      },
    });
    this.#replicas = new Replicas(redis, this.#keys.replicas, this.replicaId);
    this.#state = 'running';
    this.#taskList.warnOfCostlyRefresh();
    await this.#heartbeat();
    this.#coordinatorRun = this.#coordinator.run(this.#pollStop.signal);
    this.#loops = [this.#heartbeatLoop(), this.#taskList.refreshLoop(this.#pollStop.signal)];
    logger.info(
      {
        tasks: registry.tasks.map((t) => t.task.key),
        concurrency: config.concurrency,
        budget: config.budget,
      },
      'df-worker started (clustered)',
    );
  }

  /** Waits until Redis answers (a replica started while Redis is away waits for it, unready). */
  async #connected(redis: Redis): Promise<void> {
    redis.connect().catch(() => undefined);
    let warned = false;
    while (redis.status !== 'ready' && !this.#pollStop.signal.aborted) {
      if (!warned && redis.status === 'reconnecting') {
        this.#logger.warn('Redis does not answer yet; waiting for it');
        warned = true;
      }
      await this.#clock.sleep(100, this.#pollStop.signal).catch(() => undefined);
    }
  }

  async #heartbeat(): Promise<void> {
    const now = this.#clock.now();
    try {
      await this.#replicas!.beat(this.#config.concurrency, now);
      const alive = await this.#replicas!.alive(now);
      let capacity = 0;
      for (const beat of alive.values()) capacity += beat.concurrency;
      this.#alive = { count: alive.size, capacity };
      const counts = await this.#queue!.getJobCounts('waiting', 'active', 'delayed', 'failed', 'prioritized');
      this.#queueCounts = {
        waiting: (counts.waiting ?? 0) + (counts.prioritized ?? 0),
        active: counts.active ?? 0,
        delayed: counts.delayed ?? 0,
        failed: counts.failed ?? 0,
      };
      await this.#budget!.refresh();
      if (this.#heartbeatOk === false) this.#logger.info('Redis answers again: claiming resumes');
      this.#heartbeatOk = true;
    } catch (error) {
      if (this.#heartbeatOk !== false) {
        this.#logger.error({ err: error as Error }, 'Redis does not answer: no new claims until it does');
      }
      this.#heartbeatOk = false;
    }
  }

  async #heartbeatLoop(): Promise<void> {
    const signal = this.#pollStop.signal;
    while (!signal.aborted) {
      await this.#clock.sleep(HEARTBEAT_MS, signal).catch(() => undefined);
      if (!signal.aborted) await this.#heartbeat();
    }
  }

  #pacing() {
    const planner = this.#planner;
    if (!planner) return undefined;
    const now = this.#clock.now();
    return {
      tasks: planner.tasks.map((t) => ({ key: t.key, idleIntervalMs: planner.idleIntervalMs(now, t.key) })),
      overloaded: planner.overloaded(now),
    };
  }

  /** Polls one task (or all) now: only the coordinator polls; elsewhere nothing matches. */
  wake(taskKey?: string): number {
    return this.#coordinator?.wake(taskKey) ?? 0;
  }

  readiness(): Readiness {
    const redisOk =
      this.#redis?.status === 'ready' && this.#heartbeatOk === true && this.#budget?.redisDown !== true;
    const checks: Readiness['checks'] = {
      ...commonReadinessChecks({
        state: this.#state,
        handlersLoaded: this.#handlers !== undefined,
        serviceAnswered: this.#taskList?.answered === true,
        authorized: this.#coordinator?.authorized,
      }),
      redis: redisOk ? { ok: true } : { ok: false, reason: 'Redis does not answer: no new claims' },
    };
    const tasks = {
      served: this.#planner?.tasks.map((t) => t.key) ?? [],
      withoutTask: this.#taskList?.withoutTask ?? [],
    };
    return { ready: Object.values(checks).every((c) => c.ok), checks, tasks };
  }

  stop(): Promise<void> {
    this.#stopping ??= this.#stop();
    return this.#stopping;
  }

  async #stop(): Promise<void> {
    const logger = this.#logger;
    this.#state = 'stopping';
    this.#pollStop.abort(new Error('worker stopping'));
    // A claim still on its way into the queue waits for Redis; not beyond the grace period.
    const coordinatorDone = this.#coordinatorRun ?? Promise.resolve();
    if (await this.#race(coordinatorDone, this.#config.shutdownGraceMs)) {
      logger.error('Redis did not take the last claims within the grace period; giving up on them');
      this.#reportStop.abort(new Error('shutdown grace period over'));
      await coordinatorDone;
    }
    await Promise.allSettled(this.#loops);
    await Promise.allSettled([this.#starting]);
    const closing = this.#queueWorker?.close() ?? Promise.resolve();
    const graceOver = await this.#race(closing, this.#config.shutdownGraceMs);
    if (graceOver) {
      logger.warn('grace period over: aborting running handlers; they are reported FAILED');
      this.#handlerStop.abort(new Error('shutdown grace period over'));
      const flushOver = await this.#race(closing, Math.max(5_000, this.#config.shutdownGraceMs / 2));
      if (flushOver) this.#reportStop.abort(new Error('shutdown flush window over'));
    }
    await closing.catch(() => undefined);
    this.#handlerStop.abort(new Error('worker stopped'));
    this.#reportStop.abort(new Error('worker stopped'));
    await this.#sandbox?.close();
    await this.#replicas?.leave().catch(() => undefined);
    await this.#queue?.close().catch(() => undefined);
    this.#redis?.disconnect();
    await this.#client?.close();
    this.#state = 'stopped';
    logger.info('df-worker stopped');
  }

  /** True when `ms` ran out before `promise` settled. */
  async #race(promise: Promise<void>, ms: number): Promise<boolean> {
    const timer = new AbortController();
    const expired = this.#clock.sleep(ms, timer.signal).then(
      () => true,
      () => false,
    );
    const result = await Promise.race([
      promise.then(
        () => false,
        () => false,
      ),
      expired,
    ]);
    timer.abort();
    return result;
  }
}

/**
 * Runs `work` while holding `lock` (taken as soon as it is free; a lock whose holder died lapses after its TTL):
 * two replicas with DF_TASK_SYNC then never both create a task missing from the service.
 */
async function alone<T>(lock: CoordinatorLease, clock: Clock, work: () => Promise<T>): Promise<T> {
  while (!(await lock.tryHold())) await clock.sleep(200);
  try {
    return await work();
  } finally {
    await lock.release().catch(() => undefined);
  }
}
