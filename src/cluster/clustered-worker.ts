// Clustered mode's daemon (DF_REDIS_URL set): the daemon core (daemon/core.ts) around Redis. Every replica runs
// handlers from the cluster's queue; the one holding the coordinator lease also polls, and adds each claimed
// execution to the queue before anything else. Loaded only in clustered mode (dynamic import), so standalone
// pays nothing.
import { Queue, Worker as QueueWorker } from 'bullmq';
import { ReplyError, type Redis } from 'ioredis';
import { memoryBudgetStore } from '../budget/store.ts';
import { backoffDelayMs, type BackoffOptions } from '../clock/backoff.ts';
import type { Clock } from '../clock/clock.ts';
import type { WorkerConfig } from '../config/schema.ts';
import type { WorkerOptions } from '../daemon/contract.ts';
import {
  DaemonCore,
  expires,
  type Claimer,
  type CoreHandle,
  type CoreParts,
  type DaemonMode,
  type ModeState,
} from '../daemon/core.ts';
import { backoffFromConfig, budgetFromConfig } from '../daemon/service-wiring.ts';
import type { WorkerMetrics } from '../telemetry/metrics.ts';
import { StartupError } from '../daemon/task-list.ts';
import { registerClusterMetrics, type ClusterCounters, type QueueCounts } from './cluster-metrics.ts';
import { CoordinatorLease } from './coordinator-lease.ts';
import { ClaimIndex } from './claim-index.ts';
import { ClaimRoom } from './claim-room.ts';
import { Coordinator } from './coordinator.ts';
import { executionProcessor } from './execution-processor.ts';
import { JobFence } from './job-fence.ts';
import { QueuePruner } from './queue-pruner.ts';
import { QueueJournal, type ExecutionJobData } from './queue-journal.ts';
import {
  bullConnectionOptions,
  clusterKeys,
  connectRedis,
  REDIS_COMMAND_TIMEOUT_MS,
  redisForLogs,
  replicaIdFromConfig,
  type ClusterKeys,
} from './redis.ts';
import {
  describeRedisError,
  inspectRedis,
  REDIS_CLUSTER_REFUSED,
  RedisHealth,
  setupProblems,
  type RedisSetup,
} from './redis-health.ts';
import { HEARTBEAT_MS, Replicas } from './replicas.ts';
import { SharedBudget } from './shared-budget.ts';

/**
 * A job's lock lasts this long unless its replica renews it (every half of it): a replica killed mid-handler
 * has its execution taken up again by another within about this time plus STALLED_CHECK_MS.
 */
export const LOCK_DURATION_MS = 5_000;
export const STALLED_CHECK_MS = 2_000;
/**
 * Lock losses BullMQ tolerates before it fails a job by itself. Stalls are not crashes (the pipeline's poison
 * limit counts the runs that died, see JobFence), so this is only a bound on a job that stalls for ever.
 */
const MAX_STALLS = 1_000;

/** How long a replica may hold the task-sync lock (DF_TASK_SYNC), in ms. */
const TASK_SYNC_LOCK_MS = 60_000;

/** Redis's set-up (eviction policy, role) is read again when readiness is asked this long after, in ms. */
const REINSPECT_MS = 30_000;

/** Clustered mode: Redis holds the key's windows and the claims (a BullMQ queue); the coordinator polls. */
export class ClusteredMode implements DaemonMode<SharedBudget> {
  readonly label = 'clustered';
  readonly replicaId: string;
  readonly #keys: ClusterKeys;
  #core: CoreHandle | undefined;
  #redis: Redis | undefined;
  #budget: SharedBudget | undefined;
  #queue: Queue<ExecutionJobData> | undefined;
  #queueWorker: QueueWorker<ExecutionJobData> | undefined;
  #closing: Promise<void> | undefined;
  #replicas: Replicas | undefined;
  #coordinator: Coordinator | undefined;
  #fence: JobFence | undefined;
  #pruner: QueuePruner | undefined;
  #alive = { count: 0, capacity: 0 };
  #queueCounts: QueueCounts | undefined;
  /** True while another process holds this replica id (this one stood still longer than its heartbeat). */
  #idTaken = false;
  /** Whether the last heartbeat reached Redis; undefined before the first. */
  #heartbeatOk: boolean | undefined;
  #counters: ClusterCounters | undefined;
  #health: RedisHealth | undefined;
  /** What INFO said of Redis's set-up at the last look, and when (ms); undefined when INFO was refused. */
  #setup: { at: number; setup: RedisSetup | undefined } | undefined;

  constructor(config: WorkerConfig) {
    this.replicaId = replicaIdFromConfig(config);
    this.#keys = clusterKeys(config.api.key);
  }

  /** True while this replica holds the coordinator lease (and polls). */
  get coordinating(): boolean {
    return this.#coordinator?.coordinating ?? false;
  }

  registerMetrics(metrics: WorkerMetrics): void {
    this.#counters = registerClusterMetrics(metrics.registry, {
      replica: this.replicaId,
      coordinator: () => this.coordinating,
      queue: () => this.#queueCounts,
      replicas: () => this.#alive.count,
      slots: () => this.#alive.capacity,
    });
  }

  async open(core: CoreHandle): Promise<ModeState<SharedBudget>> {
    this.#core = core;
    const { config, logger, clock, events } = core;
    logger.info(redisForLogs(config.cluster), 'clustered mode: connecting to Redis');
    const health = new RedisHealth(logger, (kind) => this.#counters?.redisError(kind));
    this.#health = health;
    const redis = connectRedis(config.cluster, backoffFromConfig(config), (error) => health.observe(error));
    this.#redis = redis;
    await this.#connected(redis);
    // One process per replica id: refused while another's heartbeat under it lives (ReplicaIdInUseError).
    this.#replicas = new Replicas(redis, this.#keys.replicas, this.replicaId);
    if (!core.pollSignal.aborted) await this.#join(this.#replicas);
    // The local budget orders this replica's requests and paces; Redis holds the key's windows and month.
    const local = budgetFromConfig(config, clock, 2 * config.concurrency, memoryBudgetStore(), (pause) =>
      events.emit('rateLimited', pause),
    );
    await local.load();
    const budget = new SharedBudget({
      local,
      redis,
      keys: this.#keys,
      clock,
      safetyMarginMs: config.budget.safetyMarginMs,
      replicaId: this.replicaId,
      logger,
    });
    this.#budget = budget;
    if (!core.pollSignal.aborted) await budget.load();
    const month = local.month();
    logger.info({ month: month.key, used: month.used, limit: month.limit }, 'month budget usage (cluster)');
    // Long enough for a task list read that waits for budget; a replica that dies holding it delays the others.
    const syncLock = new CoordinatorLease(redis, this.#keys.taskSync, this.replicaId, TASK_SYNC_LOCK_MS);
    const journal = new QueueJournal();
    const fence = new JobFence({
      redis,
      prefix: this.#keys.prefix,
      queue: this.#keys.queue,
      lockMs: LOCK_DURATION_MS,
      clock,
    });
    this.#fence = fence;
    return {
      budget: local,
      gate: budget,
      journal,
      // A report leaves only while this replica holds its job's lock: one that lost it drops the outcome.
      fence: async (executionId) => {
        const job = journal.job(executionId);
        return job === undefined || (await fence.owns(job));
      },
      // What the planner learns of arrivals is kept in Redis by the coordinators (see Coordinator: profiles).
      keepProfile: false,
      ...(config.tasks.sync
        ? { exclusive: (read) => alone(syncLock, clock, backoffFromConfig(config), read) }
        : {}),
    };
  }

  async claim(core: CoreHandle, parts: CoreParts<SharedBudget>): Promise<Claimer> {
    const { config, logger, clock, events } = core;
    const redis = this.#redis!;
    const backoff = backoffFromConfig(config);
    const connection = bullConnectionOptions(config.cluster, backoff);
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
      pipeline: parts.pipeline,
      journal: parts.journal as QueueJournal,
      events,
      replay: config.journal.replay,
      replicaId: this.replicaId,
      fence: this.#fence!,
      maxCrashes: config.journal.maxCrashesPerExecution,
      signal: core.pollSignal,
    });
    this.#queueWorker = new QueueWorker<ExecutionJobData>(this.#keys.queue, processor, {
      prefix: this.#keys.prefix,
      connection,
      concurrency: config.concurrency,
      lockDuration: LOCK_DURATION_MS,
      stalledInterval: STALLED_CHECK_MS,
      // The pipeline fails a poison execution itself, as standalone does, once it has died that many times.
      maxStalledCount: MAX_STALLS,
      // A report not delivered before its replica stopped is retried at the daemon's back-off.
      settings: { backoffStrategy: (attemptsMade) => backoffDelayMs(attemptsMade, backoff) },
    });
    this.#queueWorker.on('error', (error) => logger.debug({ err: error }, 'queue worker error'));
    // This replica lives, yet lost these jobs' locks (a stall, a partition): not crashes of their executions.
    this.#queueWorker.on('lockRenewalFailed', (jobIds) => {
      logger.warn(
        { jobIds },
        'lost the lock of running jobs: another replica may run them; no report from here',
      );
      this.#fence!.lockLost(jobIds).catch(() => undefined);
    });
    this.#pruner = new QueuePruner({ queue: this.#queue, clock });
    const coordinator = new Coordinator({
      lease: new CoordinatorLease(redis, this.#keys.lease, this.replicaId),
      queue: this.#queue,
      client: parts.client,
      gate: parts.gate,
      planner: parts.planner,
      clock,
      logger,
      events,
      hooks: core.hooks,
      backoff,
      unauthorizedRetryMs: config.scheduler.errorBackoffMaxMs,
      capacity: () => Math.max(this.#alive.capacity, config.concurrency),
      claimBlocker: () => (redis.status === 'ready' ? undefined : 'Redis is not reachable'),
      exitSignal: core.reportSignal,
      replicaId: this.replicaId,
      taskConcurrency: (taskKey) =>
        parts.registry.tasks.find((t) => t.task.key === taskKey)?.handler.concurrency,
      claimRoom: new ClaimRoom(redis, `${this.#keys.prefix}:claim-room:${this.replicaId}`, clock),
      claims: new ClaimIndex(redis, this.#queue, this.#keys.prefix),
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
    this.#coordinator = coordinator;
    await this.#heartbeat();
    const coordinatorRun = coordinator.run(core.pollSignal);
    return {
      loops: [this.#heartbeatLoop()],
      wake: (taskKey) => coordinator.wake(taskKey),
      keyChanged: () => coordinator.keyChanged(),
      get authorized() {
        return coordinator.authorized;
      },
      // A claim still on its way into the queue waits for Redis; not beyond the grace period.
      settleClaims: async () => {
        if (await expires(clock, coordinatorRun, config.shutdownGraceMs)) {
          logger.error('Redis did not take the last claims within the grace period; giving up on them');
          core.abortReports('shutdown grace period over');
          await coordinatorRun;
        }
      },
      drained: () => (this.#closing ??= this.#queueWorker!.close()),
    };
  }

  checks(): ReturnType<DaemonMode<SharedBudget>['checks']> {
    const redisOk =
      this.#redis?.status === 'ready' && this.#heartbeatOk === true && this.#budget?.redisDown !== true;
    // What Redis last said (OOM, a refused password...) rather than only that it fails.
    const said = this.#health?.last?.message ?? 'Redis does not answer';
    const problems = this.#setup?.setup === undefined ? [] : setupProblems(this.#setup.setup);
    if (
      this.#redis?.status === 'ready' &&
      this.#core!.clock.monotonic() - (this.#setup?.at ?? 0) > REINSPECT_MS
    )
      void this.#inspect(this.#redis);
    return {
      redis: redisOk ? { ok: true } : { ok: false, reason: `${said}: no new claims` },
      redisSetup: problems.length === 0 ? { ok: true } : { ok: false, reason: problems.join('; ') },
    };
  }

  async close(): Promise<void> {
    await this.#replicas?.leave().catch(() => undefined);
    await this.#queue?.close().catch(() => undefined);
    this.#redis?.disconnect();
  }

  /** Waits until Redis answers (a replica started while Redis is away waits for it, unready). */
  async #connected(redis: Redis): Promise<void> {
    const { logger, pollSignal: signal } = this.#core!;
    if (signal.aborted) return;
    const ready = new Promise<void>((resolve) => {
      const done = () => {
        redis.off('ready', done);
        signal.removeEventListener('abort', done);
        resolve();
      };
      redis.on('ready', done);
      signal.addEventListener('abort', done);
    });
    // The error itself (refused password, untrusted certificate...) is logged as it is met (RedisHealth).
    const warn = () =>
      logger.warn({ reason: this.#health?.last?.message }, 'Redis does not answer yet; waiting for it');
    redis.once('reconnecting', warn);
    redis.connect().catch(() => undefined);
    if (redis.status !== 'ready') await ready;
    redis.off('reconnecting', warn);
    if (signal.aborted) return;
    const setup = await this.#inspect(redis);
    if (setup?.clusterEnabled === true) throw new StartupError(REDIS_CLUSTER_REFUSED);
    // After a reconnection (a failover, a restart) the server may be another one: its set-up is read again.
    redis.on('ready', () => void this.#inspect(redis));
  }

  /** Reads Redis's set-up from INFO, logs each problem once, and keeps it for readiness. */
  async #inspect(redis: Redis): Promise<RedisSetup | undefined> {
    const { logger, clock } = this.#core!;
    const health = this.#health!;
    this.#setup = { at: clock.monotonic(), setup: this.#setup?.setup };
    let setup: RedisSetup | undefined;
    try {
      setup = await inspectRedis(redis);
    } catch (error) {
      // Not an answer (the connection dropped): what was known stands, and the next look tries again.
      if (!(error instanceof ReplyError)) {
        this.#setup = { at: 0, setup: this.#setup.setup };
        return this.#setup.setup;
      }
      const message = `Redis refused INFO (${(error as Error).message}): its eviction policy and role are not checked`;
      health.once(message, () => logger.warn(message));
    }
    this.#setup = { at: clock.monotonic(), setup };
    for (const problem of setup === undefined ? [] : setupProblems(setup))
      health.once(problem, () => logger.error(problem));
    return setup;
  }

  async #join(replicas: Replicas): Promise<void> {
    const { config, clock, logger, pollSignal } = this.#core!;
    await replicas.join(config.concurrency, {
      sleep: (ms) => clock.sleep(ms, pollSignal),
      onWait: (heardAgoMs) =>
        logger.warn(
          { heardAgoMs },
          'another process has a heartbeat under this DF_REPLICA_ID; waiting for it to lapse',
        ),
    });
  }

  async #heartbeat(): Promise<void> {
    const { config, logger } = this.#core!;
    try {
      const ours = await this.#replicas!.beat(config.concurrency);
      if (!ours && this.#idTaken !== true)
        logger.error(
          { code: 'DFW_REPLICA_ID_IN_USE' },
          'another process took over DF_REPLICA_ID while this one stood still',
        );
      this.#idTaken = !ours;
      const alive = await this.#replicas!.alive();
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
      if (this.coordinating) {
        // A failed prune is tried again at the next minute; it says nothing of whether claims may go on.
        await this.#pruner!.maybePrune().catch((error: unknown) => {
          logger.warn({ err: error as Error }, 'could not remove old jobs from the queue');
        });
      }
      if (this.#heartbeatOk === false) logger.info('Redis answers again: claiming resumes');
      this.#heartbeatOk = true;
    } catch (error) {
      if (this.#heartbeatOk !== false) {
        const { message } = describeRedisError(error);
        logger.error({ err: error as Error }, `${message}: no new claims until it does`);
      }
      this.#heartbeatOk = false;
    }
  }

  async #heartbeatLoop(): Promise<void> {
    const { clock, pollSignal: signal } = this.#core!;
    while (!signal.aborted) {
      await clock.sleep(HEARTBEAT_MS, signal).catch(() => undefined);
      if (!signal.aborted) await this.#heartbeat();
    }
  }
}

export class ClusteredWorker extends DaemonCore<SharedBudget> {
  readonly replicaId: string;
  readonly #mode: ClusteredMode;

  constructor(options: WorkerOptions) {
    const mode = new ClusteredMode(options.config);
    super(options, mode, options.logger.child({ replica: mode.replicaId }));
    this.#mode = mode;
    this.replicaId = mode.replicaId;
    mode.registerMetrics(this.metrics);
  }

  /** True while this replica holds the coordinator lease (and polls). */
  get coordinating(): boolean {
    return this.#mode.coordinating;
  }
}

/**
 * Runs `work` while holding `lock` (taken as soon as it is free; a lock whose holder died lapses after its TTL):
 * two replicas with DF_TASK_SYNC then never both create a task missing from the service.
 */
async function alone<T>(
  lock: CoordinatorLease,
  clock: Clock,
  backoff: BackoffOptions,
  work: () => Promise<T>,
): Promise<T> {
  for (let attempt = 1; !(await lock.tryHold()); attempt++)
    await clock.sleep(backoffDelayMs(attempt, backoff));
  try {
    return await work();
  } finally {
    await lock.release().catch(() => undefined);
  }
}
