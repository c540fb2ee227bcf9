// What every daemon meets (the core, daemon/core.ts, in either mode): the contract the CLI runs (the `start`
// command, src/cli/run-daemon.ts), and the options both modes take.
import type { Logger } from 'pino';
import type { ServiceTransport } from '../api/client.ts';
import type { Clock } from '../clock/clock.ts';
import type { WorkerConfig } from '../config/schema.ts';
import type { TaskModule } from '../handlers/define-task.ts';
import type { WorkerMetrics } from '../telemetry/metrics.ts';
import type { TraceHook } from '../tracing/trace-hook.ts';
import type { WorkerEvents } from '../events/worker-events.ts';

export type WorkerState = 'new' | 'starting' | 'running' | 'stopping' | 'stopped';

export interface WorkerOptions {
  config: WorkerConfig;
  logger: Logger;
  clock?: Clock;
  /** Handlers already loaded (tests, demo, the month replay); default: loaded from `config.handlers.dir`. */
  handlers?: ReadonlyMap<string, TaskModule>;
  /**
   * Handlers from `config.handlers.dir` whose loading began before the worker was made (`df-worker start`
   * starts it before the daemon's own modules load, and the two run side by side); a rejection fails start()
   * as a load by the worker would. Default: loaded by start().
   */
  handlersLoading?: Promise<ReadonlyMap<string, TaskModule>>;
  metrics?: WorkerMetrics;
  /** Where the core's events go; telemetry listens on it. Default: a new one. */
  events?: WorkerEvents;
  /** How requests reach the service (the month replay: the emulator in process). Default: HTTP. */
  transport?: ServiceTransport;
  /**
   * The command that creates the handlers' tasks as a user types it here (`npx df-worker tasks sync` in a
   * project), named by the warning about a handler without its task. Default: `df-worker tasks sync`.
   */
  taskSyncCommand?: string;
  /** Traces (tracing/sdk.ts, when an OTLP endpoint is set): listens to `events`, flushed at stop. Default: none. */
  tracing?: TraceHook;
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

/** What the process runs: the daemon core in standalone or clustered mode. */
export interface DaemonWorker {
  readonly metrics: WorkerMetrics;
  readonly events: WorkerEvents;
  /** start(), the claims until stop(), the drain: resolves with the process's exit code. */
  run(): Promise<number>;
  start(): Promise<void>;
  stop(): Promise<void>;
  /** Resolves with the exit code once stopped: 0, or the mode's own (standalone: its state lock lost, 75). */
  readonly exited: Promise<number>;
  readiness(): Readiness;
  wake(taskKey?: string): number;
}
