// One worker of the handler pool as the pool keeps track of it: its channel, the attempt running on it, where
// it is in its life (starting, ready, idle, retired, gone), and what its memory and death are judged by.
import type { AttemptSpec, HostResult } from '../runner/attempt-host.ts';
import { anonymousResidentMb, oomKillCount } from './process-memory.ts';
import type { FromWorker } from './protocol.ts';
import type { TraceSlot } from '../events/hooks.ts';
import { newProcessTag } from './process-tree.ts';
import { openChannel, type Isolation, type WorkerChannel, type WorkerDeath } from './worker-channel.ts';

export type WorkerGoneReason = 'terminated' | 'timeout' | 'out-of-memory' | 'exit' | 'crash' | 'idle';

export interface PoolWorker {
  channel: WorkerChannel;
  /** The attempt running on it. */
  current: Running | undefined;
  lastExecutionId: string | undefined;
  /** The trace of the last attempt it ran: where spans that end after their attempt go. */
  lastTrace?: TraceSlot | undefined;
  exitCode: number | undefined;
  gone: boolean;
  /** Its entry runs and takes attempts; until then it is starting (0.1 to 0.3 s for a thread). */
  ready: boolean;
  /** Called once it is ready: an attempt aborted while it was starting counts its settle time from then. */
  whenReady: (() => void) | undefined;
  /** While it waits in the idle list: the timer that reaps it. */
  idleTimer: NodeJS.Timeout | undefined;
  /** Started before the handler code last changed (see retire): never given another attempt. */
  retired: boolean;
  /** A process's anonymous resident memory once it was ready, in MB: what its memory limit adds to. */
  startMb: number | undefined;
  /** The cgroup's OOM kills when it was started (see oomKillCount). */
  oomKillsAtStart: number | undefined;
  /** Why the pool killed it when its running attempt fails for it (its memory), rather than ends `stopped`. */
  killedFor: string | undefined;
}

export interface Running {
  attemptId: number;
  spec: AttemptSpec;
  /** The attempt's signal: cancels its `ctx.service` calls. */
  signal: AbortSignal;
  finish(result: HostResult): void;
  /** Why ctx.signal was aborted, once it was. */
  aborted?: 'timeout' | 'shutdown';
  /** The attempt is being ended (its worker may be terminating). */
  ending?: boolean;
}

export interface PoolWorkerOptions {
  isolation: Isolation;
  /** Heap limit of the worker, in MB (DF_HANDLER_MEMORY_MB). */
  memoryMb: number;
  env: Record<string, string>;
  onMessage(worker: PoolWorker, message: FromWorker): void;
  onExit(worker: PoolWorker, death: WorkerDeath): void;
}

/** Starts a worker: it takes attempts once it sent `ready` (see markReady). */
export function startPoolWorker(options: PoolWorkerOptions): PoolWorker {
  const worker: PoolWorker = {
    channel: undefined as unknown as WorkerChannel,
    current: undefined,
    lastExecutionId: undefined,
    exitCode: undefined,
    gone: false,
    ready: false,
    whenReady: undefined,
    idleTimer: undefined,
    retired: false,
    startMb: undefined,
    oomKillsAtStart: options.isolation === 'process' ? oomKillCount() : undefined,
    killedFor: undefined,
  };
  worker.channel = openChannel({
    isolation: options.isolation,
    memoryMb: options.memoryMb,
    env: options.env,
    tag: newProcessTag(),
    onMessage: (message) => options.onMessage(worker, message),
    onExit: (death) => options.onExit(worker, death),
  });
  return worker;
}

/** The worker said it is ready: it takes attempts, and an attempt aborted while it started may now settle. */
export function markReady(worker: PoolWorker, isolation: Isolation): void {
  worker.ready = true;
  // Before any handler code ran in it: what Node.js and the worker's own modules hold.
  if (isolation === 'process' && worker.channel.pid !== undefined) {
    worker.startMb = anonymousResidentMb(worker.channel.pid);
  }
  const whenReady = worker.whenReady;
  worker.whenReady = undefined;
  whenReady?.();
}
