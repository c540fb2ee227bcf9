// What a daemon mode is (see core.ts): what the core hands it (CoreHandle, CoreParts), what it opens (ModeState)
// and how it claims (Claimer). Standalone (standalone/standalone-mode.ts) and clustered
// (clustered/clustered-mode.ts) implement DaemonMode; the core composes one.
import type { Logger } from 'pino';
import type { RequestGate, ServiceClient } from '../api/client.ts';
import type { Budget } from '../budget/budget.ts';
import type { Clock } from '../clock/clock.ts';
import type { WorkerConfig } from '../config/schema.ts';
import type { Sandbox } from '../sandbox/index.ts';
import type { PollPlanner } from '../scheduler/poll-planner.ts';
import type { Scheduler, SchedulerOptions } from '../scheduler/scheduler.ts';
import type { WorkerMetrics } from '../telemetry/metrics.ts';
import type { Readiness, WorkerState } from './contract.ts';
import type { WorkerHooks } from '../events/hooks.ts';
import type { WorkerEvents } from '../events/worker-events.ts';
import type { ExecutionJournal } from './execution-journal.ts';
import type { ExecutionPipeline } from './execution-pipeline.ts';
import type { TaskList, TaskListOptions } from './task-list.ts';
import type { TaskRegistry } from './task-registry.ts';

/** What every request passes and the metrics read: the process's Budget, or the cluster's shared windows. */
export type BudgetGate = RequestGate & Pick<Budget, 'gateFor' | 'snapshot'>;

/** What a mode gives the poll loop; the core adds its clock, logger and events (see pollLoopOn). */
export type PollLoopOptions = Omit<
  SchedulerOptions,
  'clock' | 'logger' | 'unauthorizedRetryMs' | 'onPoll' | 'onPollAnswerLost'
>;

/** Builds poll loops (scheduler/scheduler.ts) on a core's clock, logger and events. */
export type PollLoopFactory = (options: PollLoopOptions) => Scheduler;

/** What a mode may use of the core from its start on. */
export interface CoreHandle {
  readonly config: WorkerConfig;
  readonly logger: Logger;
  readonly clock: Clock;
  readonly events: WorkerEvents;
  /** What listeners contribute (tracing's context and headers); no-ops without tracing. */
  readonly hooks: WorkerHooks;
  readonly metrics: WorkerMetrics;
  /** Aborted when stop() begins: no new poll. */
  readonly pollSignal: AbortSignal;
  /** Aborted when the grace period ends: running handlers are stopped and reported FAILED. */
  readonly handlerSignal: AbortSignal;
  /** Aborted when the daemon must exit: report retries stop. */
  readonly reportSignal: AbortSignal;
  readonly state: WorkerState;
  /** Builds the poll loop that claims (the core's scheduler). */
  readonly pollLoop: PollLoopFactory;
  /**
   * Stops the daemon (as stop() does). `exitCode`: the process's exit code when this stop is the first (the mode
   * stopped it on its own: standalone's lost state lock); run() and `exited` resolve with it. Default 0.
   */
  stop(exitCode?: number): Promise<void>;
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
  planner: PollPlanner;
  /** Saves what the planner learnt of arrivals (a no-op when the profile is kept in memory). */
  saveProfile: () => Promise<void>;
  sandbox: Sandbox;
}

/** Who claims: this process's scheduler, or the cluster's coordinator. */
export interface Claimer {
  /** Loops that end once polling stops (the core adds the task list's). */
  loops: Promise<unknown>[];
  wake(taskKey?: string): number;
  /** Another key is in use (DF_API_KEY_FILE changed): while the last was refused, try it now. */
  keyChanged?(): void;
  /** A task's next poll came forward outside a poll's answer (a job run seen starting): plan again now. */
  recheck?(): void;
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
  /** This replica's id (clustered mode): the core's log lines and traces name the replica. */
  readonly replicaId?: string;
  /**
   * False while this process does not poll (clustered: a replica without the coordinator lease), so what only
   * the poller reads (the job-executions list) is not read there. Default: always polling.
   */
  readonly polling?: boolean;
  /** Adds the mode's own metrics to the core's registry, as the core is built. */
  registerMetrics?(metrics: WorkerMetrics, events: WorkerEvents): void;
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
