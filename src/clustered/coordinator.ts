// The coordinator: while this replica holds the lease, it runs the poll planner and the scheduler for the
// whole cluster, adds each claimed execution to the queue before anything else, and claims the next only while
// the cluster has a free handler slot. On losing the lease (or on stop) it ends its term.
import type { Queue } from 'bullmq';
import type { Logger } from 'pino';
import type { RequestGate, ServiceClient } from '../api/client.ts';
import { backoffDelayMs, type BackoffOptions } from '../clock/backoff.ts';
import type { Clock } from '../clock/clock.ts';
import type { PollLoopFactory } from '../daemon/mode.ts';
import type { WorkerHooks } from '../events/hooks.ts';
import type { WorkerEvents } from '../events/worker-events.ts';
import type { PollPlanner } from '../scheduler/poll-planner.ts';
import type { PolledTask, Scheduler } from '../scheduler/scheduler.ts';
import { LEASE_RENEW_MS, type CoordinatorLease } from './coordinator-lease.ts';
import type { ClaimIndex } from './claim-index.ts';
import type { ClaimRoom } from './claim-room.ts';
import { claimJobId, COMPLETED_KEEP_MS, FAILED_KEEP_MS, type ExecutionJobData } from './queue-journal.ts';
import { QueueRoom } from './queue-room.ts';

/** How often a coordinator saves what it learnt of arrivals, besides at the end of its term, in ms. */
const PROFILE_SAVE_MS = 10 * 60_000;

/** Where the coordinators keep the poll planner's arrival profile between terms (Redis). */
export interface ProfileStore {
  load(): Promise<unknown>;
  save(state: unknown): Promise<void>;
}

export interface CoordinatorOptions {
  lease: CoordinatorLease;
  queue: Queue<ExecutionJobData>;
  client: ServiceClient;
  /** The key's budget, which every poll passes before the term's own checks (see #termGate). */
  gate: RequestGate;
  planner: PollPlanner;
  clock: Clock;
  logger: Logger;
  events: WorkerEvents;
  /** Asked for the headers each queued job carries (its trace context). Default: none. */
  hooks?: WorkerHooks;
  /** Between adds of a claimed execution to the queue while Redis refuses them (DF_RETRY_BASE_MS...). */
  backoff: BackoffOptions;
  /** Builds each term's poll loop (the core's: its clock, logger and events; see pollLoopOn). */
  pollLoop: PollLoopFactory;
  /** Executions the live replicas run at once, added up (from their heartbeats). */
  capacity: () => number;
  /** Why no execution may be claimed now (Redis away), or undefined. */
  claimBlocker: () => string | undefined;
  /** Aborted when the daemon must exit: a claim Redis still cannot take is then given up, and logged. */
  exitSignal: AbortSignal;
  /** This replica's id (DF_REPLICA_ID): written into each job as the replica that claimed it. */
  replicaId?: string;
  /**
   * What the previous coordinators learnt of arrivals: adopted as a term starts, saved every PROFILE_SAVE_MS
   * and as it ends, so that a takeover or a rolling restart keeps the pacing learnt (as a state folder does).
   */
  profiles?: ProfileStore;
  /** Room in Redis for the claim a poll may bring, reserved before each poll leaves (see ClaimRoom). */
  claimRoom?: ClaimRoom;
  /**
   * A task's defineTask `concurrency`, by task key: across the cluster, at most that many of its executions
   * are queued or running, and it is not polled while they are. Default: none.
   */
  taskConcurrency?: (taskKey: string) => number | undefined;
  /** Each execution's latest job: a claim whose job is not finished is not queued again (see ClaimIndex). */
  claims?: ClaimIndex;
}

interface Term {
  /** Counts the terms of this process: a poll belongs to the term that sent it. */
  number: number;
  scheduler: Scheduler;
  stop: AbortController;
  done: Promise<void>;
}

/**
 * Claims stop once the lease was last renewed this long before its TTL runs out, in ms: a holder that stood
 * still (a stall, a suspended VM) may have lost it to another replica before its next renewal says so.
 */
const LEASE_FENCE_MARGIN_MS = LEASE_RENEW_MS;

export class Coordinator {
  readonly #o: CoordinatorOptions;
  #term: Term | undefined;
  /** Clock instant the last successful take or renewal of the lease began (its TTL runs from after it). */
  #renewedAt = -Infinity;
  #terms = 0;
  readonly #room: QueueRoom;

  constructor(options: CoordinatorOptions) {
    this.#o = options;
    this.#room = new QueueRoom(options.queue, options.clock, options.capacity);
  }

  /** True while this replica holds the lease and polls. */
  get coordinating(): boolean {
    return this.#term !== undefined;
  }

  /** False while the service refuses the key (as seen by this replica's polls). */
  get authorized(): boolean {
    return this.#term?.scheduler.authorized ?? true;
  }

  /** Polls one task (or all) now: only while coordinating; elsewhere nothing matches. */
  wake(taskKey?: string): number {
    return this.#term?.scheduler.wake(taskKey) ?? 0;
  }

  /** A task's next poll came forward outside a poll's answer (a step reported elsewhere): plan again now. */
  recheck(): void {
    this.#term?.scheduler.recheck();
  }

  /** Another key is in use: while the last was refused, one poll tries it now. */
  keyChanged(): void {
    this.#term?.scheduler.keyChanged();
  }

  /** Tries for the lease, renews it while held, until `signal`; then ends the term and gives the lease back. */
  async run(signal: AbortSignal): Promise<void> {
    const lease = this.#o.lease;
    let savedAt = 0;
    while (!signal.aborted) {
      const tried = this.#o.clock.monotonic();
      const held = await lease.tryHold();
      if (held) this.#renewedAt = tried;
      if (signal.aborted) break;
      if (!held && this.#term) await this.#endTerm('lost the coordinator lease');
      // A poll fenced its term (the lease may have lapsed before it left): a new term starts if still held.
      else if (this.#term?.stop.signal.aborted)
        await this.#endTerm('the lease may have lapsed before a poll');
      else if (held && this.#term && this.#o.clock.monotonic() - savedAt >= PROFILE_SAVE_MS) {
        savedAt = this.#o.clock.monotonic();
        await this.#saveProfile();
      }
      if (held && !this.#term) {
        await this.#adoptProfile();
        savedAt = this.#o.clock.monotonic();
        this.#startTerm();
      }
      await this.#o.clock.sleep(LEASE_RENEW_MS, signal).catch(() => undefined);
    }
    // Saved only by a holder that stops: one that lost the lease may be behind the coordinator after it.
    if (this.#term) await this.#saveProfile();
    await this.#endTerm('stopping');
    await lease.release().catch(() => undefined);
  }

  async #adoptProfile(): Promise<void> {
    const { profiles, planner, logger } = this.#o;
    if (!profiles) return;
    try {
      const tasks = planner.profile.adopt(await profiles.load());
      if (tasks > 0) {
        planner.replan();
        logger.info({ tasks }, 'adopted the arrival profile the previous coordinators learnt');
      }
    } catch (error) {
      logger.warn({ err: error as Error }, 'could not read the arrival profile from Redis: learning afresh');
    }
  }

  async #saveProfile(): Promise<void> {
    const { profiles, planner, logger } = this.#o;
    if (!profiles) return;
    try {
      await profiles.save(planner.profile.toState());
    } catch (error) {
      logger.warn({ err: error as Error }, 'could not save the arrival profile to Redis');
    }
  }

  #startTerm(): void {
    const { clock, logger, events } = this.#o;
    const stop = new AbortController();
    const claimedAt = () => new Date(clock.now()).toISOString();
    const number = ++this.#terms;
    const scheduler = this.#o.pollLoop({
      client: this.#o.client.withGate(this.#termGate(number, stop)),
      planner: this.#o.planner,
      // One claim at a time: each dispatch holds the slot until the cluster has room for the next.
      concurrency: 1,
      claimBlocker: () => this.#leaseLapsing() ?? this.#o.claimBlocker(),
      dispatch: (task, execution) =>
        this.#enqueue(
          {
            taskId: execution.taskId,
            taskKey: task.key,
            executionId: execution.id,
            input: execution.input,
            createdAt: execution.createdAt,
            claimedAt: claimedAt(),
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
            claimedAt: claimedAt(),
            unreadable: problem,
          },
          stop.signal,
        ),
      // The cluster's slots are the queue's: its executions queued or running against the live replicas'.
      slotView: () => this.#room.slotView(),
      ...(this.#o.taskConcurrency
        ? { taskConcurrency: (task: PolledTask) => this.#o.taskConcurrency!(task.key) }
        : {}),
      onHeldBack: () => this.#room.watchHeldBack(stop.signal, () => this.#term?.scheduler.recheck()),
    });
    // The first poll waits for room too: the previous coordinator may have filled the queue.
    scheduler.enqueue(() => this.#room.wait(stop.signal));
    scheduler.wake();
    const done = scheduler
      .run(stop.signal)
      .then(() => scheduler.drained())
      .catch((error: unknown) => logger.error({ err: error as Error }, 'the poll loop failed'));
    this.#term = { number, scheduler, stop, done };
    events.emit('lease', { held: true });
  }

  /**
   * The gate of term `number`'s requests: the key's budget, then, for a poll, right before it leaves, the fence
   * of the term (a poll that waited in the budget while its process stood still, past its lease, is dropped and
   * ends the term) and the room for its claim in Redis (a poll leaves only once Redis took that write).
   */
  #termGate(number: number, stop: AbortController): RequestGate {
    const gate = this.#o.gate;
    return {
      acquire: async (operation, signal) => {
        const permit = await gate.acquire(operation, signal);
        if (operation !== 'tasks.poll') return permit;
        const ended =
          this.#term?.number !== number ? 'its lease term ended' : (this.#leaseLapsing() ?? undefined);
        if (ended !== undefined) {
          this.#o.logger.warn(
            { reason: ended },
            'poll dropped before it left: this replica may not coordinate',
          );
          this.#o.events.emit('fenced', { request: 'poll' });
          stop.abort(new Error(`poll dropped: ${ended}`));
          throw stop.signal.reason;
        }
        await this.#o.claimRoom?.reserve();
        return permit;
      },
      observe: (answer) => gate.observe?.(answer),
    };
  }

  /** Why no claim may go out although the term has not ended: the lease may have lapsed since its renewal. */
  #leaseLapsing(): string | undefined {
    const age = this.#o.clock.monotonic() - this.#renewedAt;
    if (age < this.#o.lease.ttlMs - LEASE_FENCE_MARGIN_MS) return undefined;
    return `the coordinator lease was last renewed ${Math.round(age)} ms ago and may have lapsed`;
  }

  async #endTerm(reason: string): Promise<void> {
    const term = this.#term;
    if (!term) return;
    this.#term = undefined;
    term.stop.abort(new Error(reason));
    await term.done;
    this.#o.events.emit('lease', { held: false, reason });
  }

  /** The scheduler's dispatch: the claim goes into the queue first, then polling waits for a free slot. */
  async #enqueue(claim: ExecutionJobData, termStop: AbortSignal): Promise<void> {
    const logger = this.#o.logger.child({ taskKey: claim.taskKey, executionId: claim.executionId });
    if (await this.#stillClaimed(claim, logger)) return;
    const queued = { task: claim.taskKey, executionId: claim.executionId };
    const traceContext = this.#o.hooks?.jobHeaders?.(queued);
    this.#o.events.emit('queued', queued);
    const data: ExecutionJobData = {
      ...claim,
      ...(traceContext && Object.keys(traceContext).length > 0 ? { traceContext: { ...traceContext } } : {}),
      ...(this.#o.replicaId === undefined ? {} : { claimedBy: this.#o.replicaId }),
    };
    let warned = false;
    for (let attempt = 1; ; attempt++) {
      try {
        await this.#o.queue.add('execution', data, {
          // A second add of the same claim is a no-op while the job is kept; a new claim is a new job.
          jobId: claimJobId(data),
          // Retries only of a report a replica could not deliver before it stopped (the outcome is kept), at
          // the queue worker's back-off (clustered-mode.ts: DF_RETRY_BASE_MS, DF_ERROR_BACKOFF_MAX_MS).
          attempts: 1_000,
          backoff: { type: 'df-worker' },
          removeOnComplete: { age: COMPLETED_KEEP_MS / 1000 },
          removeOnFail: { age: FAILED_KEEP_MS / 1000 },
        });
        break;
      } catch (error) {
        // Redis filled up since the poll left: the room reserved for this claim is given to it.
        if (attempt === 1 && isOutOfMemory(error) && (await this.#o.claimRoom?.release())) {
          logger.warn('Redis is full: the room reserved before the poll is given to the claim');
          continue;
        }
        if (this.#o.exitSignal.aborted) {
          logger.error(
            { err: error as Error },
            'the claimed execution could not be added to the queue before exit: look for it on the service',
          );
          return;
        }
        if (!warned) {
          warned = true;
          logger.warn({ err: error as Error }, 'cannot add the claimed execution to the queue yet; retrying');
        }
        await this.#o.clock.sleep(backoffDelayMs(attempt, this.#o.backoff));
      }
    }
    logger.info('execution claimed and queued');
    await this.#o.claims?.note(claim.executionId, claimJobId(data)).catch((error: unknown) => {
      logger.warn(
        { err: error as Error },
        "could not note the claim's job: a redelivery of it may run twice",
      );
    });
    await this.#room.wait(termStop);
  }

  /**
   * True when a job of an earlier claim of this execution is not finished: the service handed out again an
   * execution the cluster still runs or has not reported. It is not queued again; the job in hand reports it.
   * When Redis cannot tell, the claim is queued as before (running twice beats never reporting).
   */
  async #stillClaimed(claim: ExecutionJobData, logger: Logger): Promise<boolean> {
    const jobId = await this.#o.claims?.unfinished(claim.executionId).catch((error: unknown) => {
      logger.warn(
        { err: error as Error },
        'could not look for an earlier claim of the execution; queuing it',
      );
      return undefined;
    });
    if (jobId === undefined) return false;
    this.#o.events.emit('redelivered', {
      task: claim.taskKey,
      executionId: claim.executionId,
      where: 'queue',
      jobId,
    });
    return true;
  }
}

function isOutOfMemory(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith('OOM ');
}
