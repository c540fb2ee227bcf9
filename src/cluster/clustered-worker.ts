// Clustered mode's daemon (DF_REDIS_URL set): the daemon core (daemon/core.ts) around Redis. Every replica runs
// handlers from the cluster's queue; the one holding the coordinator lease also polls, and adds each claimed
// execution to the queue before anything else. Loaded only in clustered mode (dynamic import), so standalone
// pays nothing.
import { Queue, Worker as QueueWorker } from 'bullmq';
import type { Redis } from 'ioredis';
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
import { registerClusterMetrics, type QueueCounts } from './cluster-metrics.ts';
import { CoordinatorLease } from './coordinator-lease.ts';
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
/**
 * Lock losses BullMQ tolerates before it fails a job by itself. Stalls are not crashes (the pipeline's poison
 * limit counts the runs that died, see JobFence), so this is only a bound on a job that stalls for ever.
 */
const MAX_STALLS = 1_000;

/** How long a replica may hold the task-sync lock (DF_TASK_SYNC), in ms. */
const TASK_SYNC_LOCK_MS = 60_000;

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
  /** Whether the last heartbeat reached Redis; undefined before the first. */
  #heartbeatOk: boolean | undefined;

  constructor(config: WorkerConfig) {
    this.replicaId = replicaIdFromConfig(config);
    this.#keys = clusterKeys(config.api.key);
  }

  /** True while this replica holds the coordinator lease (and polls). */
  get coordinating(): boolean {
    return this.#coordinator?.coordinating ?? false;
  }

  registerMetrics(metrics: WorkerMetrics): void {
    registerClusterMetrics(metrics.registry, {
      replica: this.replicaId,
      coordinator: () => this.coordinating,
      queue: () => this.#queueCounts,
      replicas: () => this.#alive.count,
    });
  }

  async open(core: CoreHandle): Promise<ModeState<SharedBudget>> {
    this.#core = core;
    const { config, logger, clock, events } = core;
    logger.info({ redis: redisUrlForLogs(config.cluster.redisUrl) }, 'clustered mode: connecting to Redis');
    const redis = connectRedis(config.cluster.redisUrl, backoffFromConfig(config));
    this.#redis = redis;
    await this.#connected(redis);
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
    const connection = bullConnectionOptions(config.cluster.redisUrl, backoff);
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
      backoff,
      unauthorizedRetryMs: config.scheduler.errorBackoffMaxMs,
      capacity: () => Math.max(this.#alive.capacity, config.concurrency),
      claimBlocker: () => (redis.status === 'ready' ? undefined : 'Redis is not reachable'),
      exitSignal: core.reportSignal,
      claimRoom: new ClaimRoom(redis, `${this.#keys.prefix}:claim-room:${this.replicaId}`, clock),
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
    this.#replicas = new Replicas(redis, this.#keys.replicas, this.replicaId);
    await this.#heartbeat();
    const coordinatorRun = coordinator.run(core.pollSignal);
    return {
      loops: [this.#heartbeatLoop()],
      wake: (taskKey) => coordinator.wake(taskKey),
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
    return { redis: redisOk ? { ok: true } : { ok: false, reason: 'Redis does not answer: no new claims' } };
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
    const warn = () => logger.warn('Redis does not answer yet; waiting for it');
    redis.once('reconnecting', warn);
    redis.connect().catch(() => undefined);
    if (redis.status !== 'ready') await ready;
    redis.off('reconnecting', warn);
  }

  async #heartbeat(): Promise<void> {
    const { config, clock, logger } = this.#core!;
    const now = clock.now();
    try {
      await this.#replicas!.beat(config.concurrency, now);
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
        logger.error({ err: error as Error }, 'Redis does not answer: no new claims until it does');
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
