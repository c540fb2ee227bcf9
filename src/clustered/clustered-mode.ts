// Clustered mode (DF_REDIS_URL set), composed into the daemon core (daemon/core.ts) by clusteredDaemon(): Redis
// holds the key's windows and the claims. Every replica runs handlers from the cluster's queue; the one holding
// the coordinator lease also runs the poll loop, and adds each claimed execution to the queue before anything
// else. Loaded only in clustered mode (dynamic import), so standalone pays nothing.
import type { Queue, Worker as QueueWorker } from 'bullmq';
import { memoryBudgetStore } from '../budget/store.ts';
import type { WorkerConfig } from '../config/schema.ts';
import type { WorkerOptions } from '../daemon/contract.ts';
import { expires } from '../clock/expires.ts';
import { DaemonCore } from '../daemon/core.ts';
import type { Claimer, CoreHandle, CoreParts, DaemonMode, ModeState } from '../daemon/mode.ts';
import { backoffFromConfig, budgetFromConfig } from '../daemon/service-wiring.ts';
import type { WorkerMetrics } from '../telemetry/metrics.ts';
import type { WorkerEvents } from '../events/worker-events.ts';
import { registerClusterMetrics } from './cluster-metrics.ts';
import { ClusterReports } from './cluster-reports.ts';
import { ClusterWakes } from './cluster-wakes.ts';
import { alone, CoordinatorLease } from './coordinator-lease.ts';
import { ClaimIndex, releaseClaim } from './claim-index.ts';
import { ClaimRoom } from './claim-room.ts';
import { Coordinator } from './coordinator.ts';
import { executionProcessor } from './execution-processor.ts';
import { Heartbeat, joinCluster } from './heartbeat.ts';
import { JobFence } from './job-fence.ts';
import { claimQueue, LOCK_DURATION_MS, queueWorker } from './queue.ts';
import { QueuePruner } from './queue-pruner.ts';
import { QueueJournal, type ExecutionJobData } from './queue-journal.ts';
import { clusterKeys, redisForLogs, replicaIdFromConfig, type ClusterKeys } from './redis.ts';
import { RedisLink } from './redis-link.ts';
import { Replicas } from './replicas.ts';
import { SharedBudget } from './shared-budget.ts';

/** How long a replica may hold the task-sync lock (DF_TASK_SYNC), in ms. */
const TASK_SYNC_LOCK_MS = 60_000;

/** The clustered daemon: the core with a ClusteredMode (`mode.coordinating`: whether this replica polls). */
export type ClusteredDaemon = DaemonCore<SharedBudget, ClusteredMode>;

/** Builds a replica of the clustered daemon (`df-worker start` with DF_REDIS_URL). */
export function clusteredDaemon(options: WorkerOptions): ClusteredDaemon {
  return new DaemonCore(options, new ClusteredMode(options.config));
}

/** Clustered mode: Redis holds the key's windows and the claims (a BullMQ queue); the coordinator polls. */
export class ClusteredMode implements DaemonMode<SharedBudget> {
  readonly label = 'clustered';
  readonly replicaId: string;
  readonly #keys: ClusterKeys;
  #link: RedisLink | undefined;
  #budget: SharedBudget | undefined;
  #queue: Queue<ExecutionJobData> | undefined;
  #queueWorker: QueueWorker<ExecutionJobData> | undefined;
  #closing: Promise<void> | undefined;
  #replicas: Replicas | undefined;
  #coordinator: Coordinator | undefined;
  #fence: JobFence | undefined;
  #heartbeat: Heartbeat | undefined;

  constructor(config: WorkerConfig) {
    this.replicaId = replicaIdFromConfig(config);
    this.#keys = clusterKeys(config.api.key);
  }

  /** True while this replica holds the coordinator lease (and polls). */
  get coordinating(): boolean {
    return this.#coordinator?.coordinating ?? false;
  }

  get polling(): boolean {
    return this.coordinating;
  }

  registerMetrics(metrics: WorkerMetrics, events: WorkerEvents): void {
    registerClusterMetrics(metrics.registry, events, {
      replica: this.replicaId,
      coordinator: () => this.coordinating,
      queue: () => this.#heartbeat?.queueCounts,
      replicas: () => this.#heartbeat?.alive.count ?? 0,
      slots: () => this.#heartbeat?.alive.capacity ?? 0,
    });
  }

  async open(core: CoreHandle): Promise<ModeState<SharedBudget>> {
    const { config, logger, clock, events } = core;
    logger.info(redisForLogs(config.cluster), 'clustered mode: connecting to Redis');
    const link = new RedisLink(config, backoffFromConfig(config), core);
    this.#link = link;
    const redis = link.redis;
    await link.connected(core.pollSignal);
    // One process per replica id: refused while another's heartbeat under it lives (ReplicaIdInUseError).
    this.#replicas = new Replicas(redis, this.#keys.replicas, this.replicaId);
    if (!core.pollSignal.aborted) await joinCluster(this.#replicas, config.concurrency, core);
    // The local budget orders this replica's requests and paces; Redis holds the key's windows and month.
    const local = budgetFromConfig(config, clock, 2 * config.concurrency, memoryBudgetStore(), events);
    await local.load();
    const budget = new SharedBudget({
      local,
      redis,
      keys: this.#keys,
      clock,
      safetyMarginMs: config.budget.safetyMarginMs,
      replicaId: this.replicaId,
      logger,
      backoff: backoffFromConfig(config),
    });
    this.#budget = budget;
    if (!core.pollSignal.aborted) await budget.load();
    const month = local.month();
    logger.info({ month: month.key, used: month.used, limit: month.limit }, 'month budget usage (cluster)');
    // Long enough for a task list read that waits for budget; a replica that dies holding it delays the others.
    const syncLock = new CoordinatorLease(redis, this.#keys.taskSync, this.replicaId, TASK_SYNC_LOCK_MS);
    const journal = new QueueJournal({
      settled: (executionId, jobId) =>
        releaseClaim(redis, this.#keys.prefix, executionId, jobId).catch((error: unknown) => {
          logger.warn(
            { err: error as Error, executionId },
            'could not mark the claim answered in Redis: a claim of it made before its job ends is taken for a redelivery',
          );
        }),
    });
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
    const redis = this.#link!.redis;
    const backoff = backoffFromConfig(config);
    const queue = claimQueue(config, this.#keys, backoff);
    this.#queue = queue;
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
    const fence = this.#fence!;
    this.#queueWorker = queueWorker({ config, keys: this.#keys, backoff, processor, fence, logger });
    const coordinator = new Coordinator({
      lease: new CoordinatorLease(redis, this.#keys.lease, this.replicaId),
      queue,
      client: parts.client,
      gate: parts.gate,
      planner: parts.planner,
      clock,
      logger,
      events,
      hooks: core.hooks,
      backoff,
      pollLoop: core.pollLoop,
      capacity: () => Math.max(this.#heartbeat?.alive.capacity ?? 0, config.concurrency),
      claimBlocker: () => (redis.status === 'ready' ? undefined : 'Redis is not reachable'),
      exitSignal: core.reportSignal,
      replicaId: this.replicaId,
      taskConcurrency: (taskKey) =>
        parts.registry.tasks.find((t) => t.task.key === taskKey)?.handler.concurrency,
      claimRoom: new ClaimRoom(redis, `${this.#keys.prefix}:claim-room:${this.replicaId}`, clock),
      claims: new ClaimIndex(redis, queue, this.#keys.prefix),
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
    const wakes = new ClusterWakes(redis, `${this.#keys.prefix}:wakes`, logger);
    // Successor pacing on the coordinator hears of the steps the other replicas reported.
    const reports = config.scheduler.pipelinePacing
      ? new ClusterReports(redis, `${this.#keys.prefix}:reports`, logger, events)
      : undefined;
    reports?.passWhile(() => this.coordinating);
    const heartbeat = new Heartbeat({
      replicas: this.#replicas!,
      queue,
      budget: this.#budget!,
      pruner: new QueuePruner({ queue, clock }),
      coordinating: () => this.coordinating,
      whileCoordinating: async () => {
        for (const task of await wakes.take()) coordinator.wake(task);
        await reports?.tell();
      },
      concurrency: config.concurrency,
      clock,
      logger,
    });
    this.#heartbeat = heartbeat;
    await heartbeat.beat();
    const coordinatorRun = coordinator.run(core.pollSignal);
    return {
      loops: [heartbeat.loop(core.pollSignal)],
      // Only the coordinator polls: a wake asked on another replica goes to it through Redis.
      wake: (taskKey) => {
        if (this.coordinating) return coordinator.wake(taskKey);
        void wakes.ask(taskKey);
        return parts.registry.tasks.filter((t) => taskKey === undefined || t.task.key === taskKey).length;
      },
      keyChanged: () => coordinator.keyChanged(),
      recheck: () => coordinator.recheck(),
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
    const othersOk = this.#heartbeat?.ok === true && this.#budget?.redisDown !== true;
    return (
      this.#link?.checks(othersOk) ?? {
        redis: { ok: false, reason: 'Redis does not answer: no new claims' },
        redisSetup: { ok: true },
      }
    );
  }

  async close(): Promise<void> {
    await this.#replicas?.leave().catch(() => undefined);
    await this.#queue?.close().catch(() => undefined);
    this.#link?.redis.disconnect();
  }
}
