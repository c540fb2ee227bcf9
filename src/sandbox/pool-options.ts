// What the handler pool is set up with: each option with its unit, the DF_* setting it comes from, and its
// default.
import type { Logger } from 'pino';
import type { Redact } from '../secrets/redact.ts';
import type { Isolation } from './worker-channel.ts';
import type { WorkerEvents } from '../events/worker-events.ts';

export interface HandlerPoolOptions {
  isolation: Isolation;
  /**
   * Memory limit of each worker, in MB (DF_HANDLER_MEMORY_MB): its V8 heap's, and for a process also the
   * anonymous resident memory it may add to what it held when it started (watched every memoryWatchMs).
   */
  memoryMb: number;
  /** How often each worker process's resident memory is read, in ms. Default: MEMORY_WATCH_MS. */
  memoryWatchMs?: number;
  /** Largest output sent back, as JSON in bytes (DF_HANDLER_MAX_OUTPUT_BYTES); none: no limit. */
  maxOutputBytes?: number;
  /** The workers' environment: already without the daemon's secrets. */
  env: Record<string, string>;
  /** Receives what happens outside any attempt (late errors, workers lost while idle). */
  logger: Logger;
  redact: Redact;
  /** Workers kept alive between attempts (the daemon's concurrency). */
  maxIdle: number;
  /**
   * How long a worker may wait for its next attempt before it is terminated, in ms (DF_HANDLER_IDLE_TIMEOUT_MS);
   * 0 keeps idle workers for ever. Default: 0.
   */
  idleTimeoutMs?: number;
  /**
   * How long an aborted attempt's `ctx.signal` has to stop the handler before its worker is terminated, in ms.
   * Default: DEFAULT_ABORT_SETTLE_MS.
   */
  abortSettleMs?: number;
  /** How long a worker still starting when its attempt was aborted may take to start. Default: START_BACKSTOP_MS. */
  startBackstopMs?: number;
  /**
   * How long an attempt waits for a busy worker to free before another worker is started, in ms: a new worker
   * costs its memory and 0.1 to 0.3 s before its first attempt, while quick handlers free theirs sooner, so a
   * backlog of them is drained by one or two warm workers. Default: DEFAULT_SPAWN_AFTER_MS.
   */
  spawnAfterMs?: number;
  /** Where each worker's start, and its going away and why (`handlerWorker`), is told. Default: none. */
  events?: WorkerEvents;
}

/** Default of `abortSettleMs`, in ms. */
export const DEFAULT_ABORT_SETTLE_MS = 1_000;
/**
 * How long a worker still starting when its attempt was aborted may take to start before it is terminated: its
 * handler cannot hear the abort before then, so the settle time counts from its start. A child process takes
 * 0.2 to 0.5 s to start, seconds on a loaded machine; this only catches one that never does.
 */
export const START_BACKSTOP_MS = 15_000;
/** Default of `spawnAfterMs`, in ms. */
export const DEFAULT_SPAWN_AFTER_MS = 50;
/**
 * How often a worker process's memory is read, in ms: a handler filling Buffers at a few GB/s may pass its limit
 * by that much before it is killed; past the container's limit, the kernel ends the handler process instead
 * (process-memory.ts, HANDLER_OOM_SCORE_ADJ).
 */
export const MEMORY_WATCH_MS = 100;
