// Clustered mode's daemon (DF_REDIS_URL set): the same parts as the standalone Worker (handler host, budget,
// client, task list, planner, scheduler, execution pipeline), wired around Redis. Every replica runs handlers
// from the cluster's queue; the one holding the coordinator lease also polls, and adds each claimed execution
// to the queue before anything else. Loaded only in clustered mode (dynamic import), so standalone pays nothing.
import { Queue, UnrecoverableError, Worker as QueueWorker, type Job } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { ServiceClient } from '../api/client.ts';
import type { TaskExecution } from '../api/types.ts';
import { memoryBudgetStore } from '../budget/store.ts';
import { systemClock, type Clock } from '../clock/clock.ts';
import type { WorkerConfig } from '../config/schema.ts';
import { ExecutionPipeline } from '../daemon/execution-pipeline.ts';
import { pipelineMetrics } from '../daemon/pipeline-metrics.ts';
import {
  backoffFromConfig,
  budgetFromConfig,
  clientFromConfig,
  plannerFromConfig,
} from '../daemon/service-wiring.ts';
import { TaskList } from '../daemon/task-list.ts';
import { TaskRegistry } from '../daemon/task-registry.ts';
import type { Readiness, WorkerOptions } from '../daemon/worker.ts';
import type { TaskModule } from '../handlers/define-task.ts';
import { sandboxFromConfig, type Sandbox } from '../sandbox/index.ts';
import type { PollPlanner } from '../scheduler/poll-planner.ts';
import { Reporter } from '../scheduler/reporter.ts';
import { Scheduler, type PolledTask } from '../scheduler/scheduler.ts';
import { WorkerMetrics } from '../telemetry/metrics.ts';
import { registerClusterMetrics, type QueueCounts } from './cluster-metrics.ts';
import { CoordinatorLease, LEASE_RENEW_MS } from './coordinator-lease.ts';
import { entryOfJob, QueueJournal, type ExecutionJobData } from './queue-journal.ts';
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

/** Wait between two looks at the queue while the cluster's handler slots are all taken, in ms. */
const ROOM_CHECK_MS = 200;
/** Wait before adding a claimed execution to the queue again while Redis does not answer, in ms. */
const ADD_RETRY_MS = 500;

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
  #sandbox: Sandbox | undefined;
  #redis: Redis | undefined;
  #budget: SharedBudget | undefined;
  #client: ServiceClient | undefined;
  #taskList: TaskList | undefined;
  #planner: PollPlanner | undefined;
  #pipeline: ExecutionPipeline | undefined;
  #queue: Queue<ExecutionJobData> | undefined;
  #queueWorker: QueueWorker<ExecutionJobData> | undefined;
  #lease: CoordinatorLease | undefined;
  #replicas: Replicas | undefined;
  readonly #journal = new QueueJournal();
  /** The poller while this replica coordinates. */
  #term: { scheduler: Scheduler; stop: AbortController; done: Promise<void> } | undefined;
  #alive = { count: 0, capacity: 0 };
  #queueCounts: QueueCounts | undefined;
  #heartbeatOk = false;
  readonly #pollStop = new AbortController();
  readonly #handlerStop = new AbortController();
  readonly #reportStop = new AbortController();
  #loops: Promise<unknown>[] = [];
  #starting: Promise<void> | undefined;
  #stopping: Promise<void> | undefined;

  constructor(options: WorkerOptions) {
    this.#config = options.config;
    this.#clock = options.clock ?? systemClock;
    this.#handlers = options.handlers;
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
    return this.#term !== undefined;
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
    const handlers = this.#handlers ?? (await sandbox.loadHandlers(config.handlers.dir, logger));
    this.#handlers = handlers;
    logger.info({ handlers: [...handlers.keys()], dir: config.handlers.dir }, 'handlers loaded');

    logger.info({ redis: redisUrlForLogs(config.cluster.redisUrl) }, 'clustered mode: connecting to Redis');
    const redis = connectRedis(config.cluster.redisUrl);
    this.#redis = redis;
    await this.#connected(redis);
    if (this.#pollStop.signal.aborted) return;

    // The local budget orders this replica's requests and paces; Redis holds the key's windows and month.
    const local = budgetFromConfig(config, clock, 2 * config.concurrency, memoryBudgetStore());
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

    this.#client = clientFromConfig(config, this.#budget, (e) => {
      this.metrics.observeResponse(e.operation, e.status, e.durationMs);
      if (e.status === 429) logger.warn({ operation: e.operation }, 'the service answered 429 RATE_LIMIT');
    });
    const registry = new TaskRegistry({ handlers, client: this.#client, logger, sync: config.tasks.sync });
    this.#taskList = new TaskList({ registry, config, logger, clock, metrics: this.metrics });
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
    // What the planner learns of arrivals stays with the coordinator's term (no state folder is shared).
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
    this.#queueWorker = new QueueWorker<ExecutionJobData>(this.#keys.queue, (job) => this.#process(job), {
      prefix: this.#keys.prefix,
      connection,
      concurrency: config.concurrency,
      lockDuration: LOCK_DURATION_MS,
      stalledInterval: STALLED_CHECK_MS,
      // The pipeline fails a poison execution itself, as standalone does, once it has died that many times.
      maxStalledCount: config.journal.maxCrashesPerExecution + 1,
    });
    this.#queueWorker.on('error', (error) => logger.debug({ err: error }, 'queue worker error'));
    this.#lease = new CoordinatorLease(redis, this.#keys.lease, this.replicaId);
    this.#replicas = new Replicas(redis, this.#keys.replicas, this.replicaId);
    this.#state = 'running';
    this.#taskList.warnOfCostlyRefresh();
    await this.#heartbeat();
    this.#loops = [
      this.#heartbeatLoop(),
      this.#coordinatorLoop(),
      this.#taskList.refreshLoop(this.#pollStop.signal),
    ];
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

  /** Runs one execution of the queue to its end on this replica's handler host. */
  async #process(job: Job<ExecutionJobData>): Promise<string> {
    const data = job.data;
    const pipeline = this.#pipeline!;
    const polled: PolledTask = { taskId: data.taskId, key: data.taskKey };
    this.#journal.attach(job);
    try {
      if (data.unreadable !== undefined && !data.outcome) {
        await pipeline.failUnreadable(polled, data.executionId, data.unreadable);
      } else if (data.outcome || job.stalledCounter > 0 || job.attemptsMade > 0) {
        // Taken up again: its replica died (stalled) or stopped before the report got through.
        this.metrics.replayed.inc({ phase: data.outcome ? 'finished' : 'claimed' });
        await pipeline.resume(entryOfJob(job), this.#config.journal.replay);
      } else {
        const execution: TaskExecution = {
          object: 'task_execution',
          id: data.executionId,
          taskId: data.taskId,
          createdAt: data.createdAt,
          status: 'IN_PROGRESS',
          input: data.input,
        };
        await pipeline.process(polled, execution);
      }
    } finally {
      this.#settled(job, this.#journal.release(data.executionId));
    }
    return this.replicaId;
  }

  #settled(job: Job<ExecutionJobData>, end: ReturnType<QueueJournal['release']>): void {
    if (end.kind === 'delivered') return;
    if (end.kind === 'dead-lettered') {
      // Kept in the queue's failed jobs for an operator, as the dead-letter folder keeps them standalone.
      throw new UnrecoverableError(
        `the service refused the report for good (${end.answer.status}${end.answer.code ? ` ${end.answer.code}` : ''}): ${end.answer.message ?? ''}`,
      );
    }
    throw new Error(
      `execution ${job.data.executionId}: report not delivered before this replica stopped; retried`,
    );
  }

  /** The coordinator's dispatch: the claim goes into the queue first, then polling waits for a free slot. */
  async #enqueue(data: ExecutionJobData, termStop: AbortSignal): Promise<void> {
    const logger = this.#logger.child({ taskKey: data.taskKey, executionId: data.executionId });
    for (let attempt = 1; ; attempt++) {
      try {
        await this.#queue!.add('execution', data, {
          jobId: data.executionId,
          // Retries only of a report this replica could not deliver before it stopped (the outcome is kept).
          attempts: 1_000,
          backoff: { type: 'fixed', delay: 1_000 },
          removeOnComplete: { age: 3_600 },
          removeOnFail: { age: 7 * 86_400 },
        });
        break;
      } catch (error) {
        if (this.#reportStop.signal.aborted) {
          logger.error(
            { err: error as Error },
            'the claimed execution could not be added to the queue before exit: look for it on the service',
          );
          return;
        }
        if (attempt === 1)
          logger.warn({ err: error as Error }, 'cannot add the claimed execution to the queue yet; retrying');
        await this.#clock.sleep(ADD_RETRY_MS);
      }
    }
    logger.info('execution claimed and queued');
    await this.#roomInCluster(termStop);
  }

  /** Resolves once the queue holds fewer executions than the cluster's replicas run at once (or on `stop`). */
  async #roomInCluster(stop: AbortSignal): Promise<void> {
    while (!stop.aborted) {
      try {
        const counts = await this.#queue!.getJobCounts('waiting', 'active', 'prioritized');
        const queued = (counts.waiting ?? 0) + (counts.active ?? 0) + (counts.prioritized ?? 0);
        if (queued < Math.max(this.#alive.capacity, this.#config.concurrency)) return;
      } catch {
        // Redis away: no new claim until it is back.
      }
      await this.#clock.sleep(ROOM_CHECK_MS, stop).catch(() => undefined);
    }
  }

  #startTerm(): void {
    const config = this.#config;
    const logger = this.#logger;
    const stop = new AbortController();
    const scheduler = new Scheduler({
      client: this.#client!,
      planner: this.#planner!,
      clock: this.#clock,
      logger,
      // One claim at a time: each dispatch holds the slot until the cluster has room for the next.
      concurrency: 1,
      unauthorizedRetryMs: config.scheduler.errorBackoffMaxMs,
      claimBlocker: () => (this.#redis?.status === 'ready' ? undefined : 'Redis is not reachable'),
      dispatch: (task, execution) =>
        this.#enqueue(
          {
            taskId: execution.taskId,
            taskKey: task.key,
            executionId: execution.id,
            input: execution.input,
            createdAt: execution.createdAt,
            claimedAt: new Date(this.#clock.now()).toISOString(),
          },
          stop.signal,
        ),
      failUnreadable: (task, executionId, problem) =>
        this.#enqueue(
          {
            taskId: task.taskId,
            taskKey: task.key,
            executionId,
            input: {},
            createdAt: '',
            claimedAt: new Date(this.#clock.now()).toISOString(),
            unreadable: problem,
          },
          stop.signal,
        ),
      onPoll: (task, result) => this.metrics.polls.inc({ task: task.key, result }),
      onPollAnswerLost: (task) => this.metrics.pollAnswersLost.inc({ task: task.key }),
    });
    // The first poll waits for room too: the previous coordinator may have filled the queue.
    scheduler.enqueue(() => this.#roomInCluster(stop.signal));
    scheduler.wake();
    const done = scheduler
      .run(stop.signal)
      .then(() => scheduler.drained())
      .catch((error: unknown) => logger.error({ err: error as Error }, 'the poll loop failed'));
    this.#term = { scheduler, stop, done };
    logger.info('took the coordinator lease: polling for the cluster');
  }

  async #endTerm(reason: string): Promise<void> {
    const term = this.#term;
    if (!term) return;
    this.#term = undefined;
    term.stop.abort(new Error(reason));
    await term.done;
    this.#logger.info({ reason }, 'stopped polling for the cluster');
  }

  async #coordinatorLoop(): Promise<void> {
    const signal = this.#pollStop.signal;
    while (!signal.aborted) {
      const held = await this.#lease!.tryHold();
      if (signal.aborted) break;
      if (held && !this.#term) this.#startTerm();
      else if (!held && this.#term) await this.#endTerm('lost the coordinator lease');
      await this.#clock.sleep(LEASE_RENEW_MS, signal).catch(() => undefined);
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
      if (!this.#heartbeatOk) this.#logger.info('Redis answers');
      this.#heartbeatOk = true;
    } catch (error) {
      if (this.#heartbeatOk)
        this.#logger.error({ err: error as Error }, 'Redis does not answer: no new claims');
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
    return this.#term?.scheduler.wake(taskKey) ?? 0;
  }

  readiness(): Readiness {
    const redisOk = this.#redis?.status === 'ready' && this.#heartbeatOk && this.#budget?.redisDown !== true;
    const checks: Readiness['checks'] = {
      started: this.#state === 'running' ? { ok: true } : { ok: false, reason: `worker is ${this.#state}` },
      handlers: this.#handlers ? { ok: true } : { ok: false, reason: 'handlers not loaded' },
      service: this.#taskList?.answered
        ? this.#term?.scheduler.authorized === false
          ? { ok: false, reason: 'the service refuses the API key (401)' }
          : { ok: true }
        : { ok: false, reason: 'the service has not answered yet' },
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
    const term = this.#term;
    if (await this.#race(this.#endTerm('stopping'), this.#config.shutdownGraceMs)) {
      logger.error('Redis did not take the last claims within the grace period; giving up on them');
      this.#reportStop.abort(new Error('shutdown grace period over'));
      await term?.done;
    }
    await this.#lease?.release().catch(() => undefined);
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
