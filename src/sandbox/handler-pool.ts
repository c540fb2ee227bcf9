// Runs handler attempts in a pool of workers (threads or child processes), one attempt per worker at a time,
// so the daemon's event loop (budget, polls, reports, health, metrics) never waits on handler code. A worker
// whose handler overruns its deadline without yielding, exhausts its heap, calls process.exit or crashes is
// terminated or replaced; only that attempt fails. A worker process is also watched for memory off the heap
// (Buffers, native code; memory-watch.ts): one past DF_HANDLER_MEMORY_MB beyond its start is killed. What a
// worker's messages other than its result mean is attempt-relay.ts's.
import {
  inlineHost,
  withOutputLimit,
  type AttemptHost,
  type AttemptSpec,
  type HostResult,
} from '../runner/attempt-host.ts';
import { HandlerTimeoutError } from '../runner/errors.ts';
import { hostResult, relayMessage } from './attempt-relay.ts';
import {
  DEFAULT_ABORT_SETTLE_MS,
  DEFAULT_SPAWN_AFTER_MS,
  MEMORY_WATCH_MS,
  START_BACKSTOP_MS,
  type HandlerPoolOptions,
} from './pool-options.ts';
import { startPoolWorker, type PoolWorker, type Running, type WorkerGoneReason } from './pool-worker.ts';
import { MemoryWatch } from './memory-watch.ts';
import { endTreeProcesses } from './process-tree.ts';
import type { FromWorker } from './protocol.ts';
import type { WorkerDeath } from './worker-channel.ts';
import { describeDeath, describeOverLimit, goneReason } from './worker-death.ts';

export type { WorkerGoneReason } from './pool-worker.ts';
export {
  DEFAULT_ABORT_SETTLE_MS,
  DEFAULT_SPAWN_AFTER_MS,
  MEMORY_WATCH_MS,
  START_BACKSTOP_MS,
  type HandlerPoolOptions,
} from './pool-options.ts';

/** An attempt waiting for a free worker. */
interface Waiting {
  spec: AttemptSpec;
  file: string;
  signal: AbortSignal;
  resolve: (result: Promise<HostResult> | HostResult) => void;
  timer: NodeJS.Timeout;
  onAbort: () => void;
}

export class HandlerPool implements AttemptHost {
  readonly #o: HandlerPoolOptions;
  readonly #idle: PoolWorker[] = [];
  readonly #workers = new Set<PoolWorker>();
  readonly #waiting: Waiting[] = [];
  #nextAttemptId = 1;
  #closed = false;
  /** Runs handlers given as objects, on this loop. */
  readonly #inline: AttemptHost;
  /** Reads the worker processes' memory while there are any. */
  readonly #memoryWatch: MemoryWatch;

  constructor(options: HandlerPoolOptions) {
    this.#o = options;
    this.#inline =
      options.maxOutputBytes === undefined ? inlineHost : withOutputLimit(inlineHost, options.maxOutputBytes);
    this.#memoryWatch = new MemoryWatch({
      workers: this.#workers,
      limitMb: options.memoryMb,
      everyMs: options.memoryWatchMs ?? MEMORY_WATCH_MS,
      over: (worker, addedMb) => this.#killOverLimit(worker, addedMb),
    });
  }

  /** Workers alive, and how many of them run an attempt. */
  get workers(): { total: number; busy: number } {
    let busy = 0;
    for (const worker of this.#workers) if (worker.current) busy++;
    return { total: this.#workers.size, busy };
  }

  /** Process ids of the workers (the daemon's own for threads): for footprint measurements. */
  workerPids(): number[] {
    return [...this.#workers].flatMap((worker) =>
      worker.channel.pid === undefined ? [] : [worker.channel.pid],
    );
  }

  run(spec: AttemptSpec, signal: AbortSignal): Promise<HostResult> {
    if (this.#closed) return Promise.resolve({ kind: 'stopped' });
    const file = spec.handler.file;
    // A handler given as an object (embedding, tests) has no module a worker could import: it runs inline.
    if (file === undefined) return this.#inline.run(spec, signal);
    const worker = this.#takeIdle() ?? (this.#workers.size === 0 ? this.#spawn() : undefined);
    if (worker) return this.#start(worker, spec, signal, file);
    return new Promise<HostResult>((resolve) => {
      const waiting: Waiting = {
        spec,
        file,
        signal,
        resolve,
        timer: this.#spawnTimer(() => {
          this.#stopWaiting(waiting);
          resolve(this.#start(this.#spawn(), spec, signal, file));
        }),
        onAbort: () => {
          // Aborted before any handler code ran for it: nothing to stop.
          this.#stopWaiting(waiting);
          resolve({ kind: 'stopped' });
        },
      };
      if (signal.aborted) {
        clearTimeout(waiting.timer);
        resolve({ kind: 'stopped' });
        return;
      }
      signal.addEventListener('abort', waiting.onAbort, { once: true });
      this.#waiting.push(waiting);
    });
  }

  /**
   * Calls `spawn` after spawnAfterMs, or later while another worker is still starting: that one takes attempts
   * soon, so workers are added one at a time, each when the ones before could not keep up.
   */
  #spawnTimer(spawn: () => void): NodeJS.Timeout {
    const timer = setTimeout(() => {
      if ([...this.#workers].some((worker) => !worker.ready)) timer.refresh();
      else spawn();
    }, this.#o.spawnAfterMs ?? DEFAULT_SPAWN_AFTER_MS);
    return timer;
  }

  #stopWaiting(waiting: Waiting): void {
    clearTimeout(waiting.timer);
    waiting.signal.removeEventListener('abort', waiting.onAbort);
    const i = this.#waiting.indexOf(waiting);
    if (i >= 0) this.#waiting.splice(i, 1);
  }

  #start(worker: PoolWorker, spec: AttemptSpec, signal: AbortSignal, file: string): Promise<HostResult> {
    const attemptId = this.#nextAttemptId++;
    return new Promise<HostResult>((resolve) => {
      let settleTimer: NodeJS.Timeout | undefined;
      const onAbort = () =>
        this.#abort(worker, attemptId, signal, (timer) => {
          clearTimeout(settleTimer);
          settleTimer = timer;
        });
      const finish = (result: HostResult) => {
        if (worker.current?.attemptId !== attemptId) return;
        worker.current = undefined;
        clearTimeout(settleTimer);
        worker.whenReady = undefined;
        signal.removeEventListener('abort', onAbort);
        this.#release(worker);
        resolve(result);
      };
      worker.current = { attemptId, spec, signal, finish };
      worker.lastExecutionId = spec.execution.id;
      worker.lastTrace = spec.trace;
      worker.channel.ref();
      worker.channel.send({
        type: 'run',
        attemptId,
        file,
        taskKey: spec.task.key,
        input: spec.input,
        execution: spec.execution,
        task: spec.task,
        attempt: spec.attempt,
        job: spec.job,
        tmpDir: spec.tmpDir,
        logLevel: spec.logger.level,
        ...(this.#o.maxOutputBytes === undefined ? {} : { maxOutputBytes: this.#o.maxOutputBytes }),
        ...(spec.trace?.headers ? { trace: spec.trace.headers } : {}),
      });
      if (signal.aborted) onAbort();
      else signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  /**
   * The handler modules changed on disk (df-worker dev): a worker keeps the modules it imported, so idle workers
   * are terminated now and busy ones once their attempt ends; the next attempt starts a worker that imports the
   * files afresh. Attempts running finish on the code they started with.
   */
  retire(): void {
    for (const worker of this.#workers) worker.retired = true;
    for (const worker of [...this.#idle]) void this.#terminate(worker, 'idle');
  }

  /** Terminates every worker; attempts still running end `stopped`. */
  async close(): Promise<void> {
    this.#closed = true;
    this.#idle.length = 0;
    for (const waiting of [...this.#waiting]) {
      this.#stopWaiting(waiting);
      waiting.resolve({ kind: 'stopped' });
    }
    await Promise.all([...this.#workers].map((worker) => this.#terminate(worker, 'terminated')));
  }

  /**
   * ctx.signal aborts inside the worker; the handler gets `abortSettleMs` to stop by itself. One that did is
   * kept (a timeout it honoured), unless the daemon is stopping; one that did not is terminated. Either way the
   * attempt ends `stopped` only once the handler can do nothing more: nothing it does follows the report.
   */
  #abort(
    worker: PoolWorker,
    attemptId: number,
    signal: AbortSignal,
    setTimer: (timer: NodeJS.Timeout) => void,
  ): void {
    const running = worker.current;
    if (running?.attemptId !== attemptId || running.aborted) return;
    running.aborted = signal.reason instanceof HandlerTimeoutError ? 'timeout' : 'shutdown';
    worker.channel.send({
      type: 'abort',
      attemptId,
      reason: running.aborted,
      timeoutMs: running.spec.timeoutMs,
    });
    const settle = (ms: number) => {
      const timer = setTimeout(() => this.#endAborted(worker, running, true), ms);
      timer.unref();
      setTimer(timer);
    };
    if (worker.ready) {
      settle(this.#o.abortSettleMs ?? DEFAULT_ABORT_SETTLE_MS);
      return;
    }
    // Still starting: no handler code ran yet. At shutdown it is terminated now; at a timeout it is kept, and its
    // handler gets the settle time from when it can hear the abort (the run and the abort wait for its start).
    if (running.aborted === 'shutdown') {
      this.#endAborted(worker, running, true);
      return;
    }
    settle(this.#o.startBackstopMs ?? START_BACKSTOP_MS);
    worker.whenReady = () => settle(this.#o.abortSettleMs ?? DEFAULT_ABORT_SETTLE_MS);
  }

  /** Ends an aborted attempt `stopped`, its worker terminated first when `terminate`. */
  #endAborted(worker: PoolWorker, running: Running, terminate: boolean): void {
    if (worker.current !== running || running.ending) return;
    running.ending = true;
    if (!terminate) {
      // The handler stopped, yet what it started may not have: those end before the attempt does.
      void this.#endStarted(worker, true).then(() => running.finish({ kind: 'stopped' }));
      return;
    }
    // Still current while it is terminated, so its exit is not taken for a crash of the attempt.
    void this.#terminate(worker, running.aborted === 'timeout' ? 'timeout' : 'terminated').then(() =>
      running.finish({ kind: 'stopped' }),
    );
  }

  #spawn(): PoolWorker {
    const worker = startPoolWorker({
      isolation: this.#o.isolation,
      memoryMb: this.#o.memoryMb,
      env: this.#o.env,
      onMessage: (worker, message) => this.#onMessage(worker, message),
      onExit: (worker, death) => this.#onExit(worker, death),
    });
    this.#workers.add(worker);
    this.#o.events?.emit('handlerWorker', { started: true });
    if (this.#o.isolation === 'process') this.#memoryWatch.start();
    return worker;
  }

  #killOverLimit(worker: PoolWorker, addedMb: number): void {
    worker.killedFor = describeOverLimit(addedMb, this.#o.memoryMb);
    if (!worker.current) {
      this.#o.logger.error(
        { lastExecutionId: worker.lastExecutionId, addedMb: Math.round(addedMb) },
        `a handler worker went over its memory limit between attempts: ${worker.killedFor}`,
      );
    }
    void this.#terminate(worker, 'out-of-memory');
  }

  #release(worker: PoolWorker): void {
    if (worker.gone) return;
    const waiting = this.#closed ? undefined : this.#waiting[0];
    if (waiting) {
      this.#stopWaiting(waiting);
      waiting.resolve(this.#start(worker, waiting.spec, waiting.signal, waiting.file));
      return;
    }
    worker.channel.unref();
    // A retired worker counts as one not needed idle: its replacement is started by the next attempt.
    if (this.#closed || worker.retired || this.#idle.length >= this.#o.maxIdle) {
      void this.#terminate(worker, 'idle');
      return;
    }
    this.#idle.push(worker);
    const idleTimeoutMs = this.#o.idleTimeoutMs ?? 0;
    if (idleTimeoutMs > 0) {
      // A warm worker costs tens of MB for as long as it lives; one that waited this long is not needed.
      worker.idleTimer = setTimeout(() => void this.#terminate(worker, 'idle'), idleTimeoutMs);
      worker.idleTimer.unref();
    }
  }

  /** The worker that went idle last (its code is the warmest), its reaping called off. */
  #takeIdle(): PoolWorker | undefined {
    const worker = this.#idle.pop();
    if (worker) {
      clearTimeout(worker.idleTimer);
      worker.idleTimer = undefined;
    }
    return worker;
  }

  async #terminate(worker: PoolWorker, reason: WorkerGoneReason): Promise<void> {
    if (!worker.gone) {
      worker.gone = true;
      this.#forget(worker);
      this.#o.events?.emit('handlerWorker', { started: false, reason });
    }
    // The worker and every process it started: SIGTERM, SIGKILL after a short bound; then the worker for sure.
    await this.#endStarted(worker, false);
    await worker.channel.terminate();
    // An attempt still on it (close() while it ran) ends `stopped`: its exit is not reported as a crash. One
    // whose worker went over its memory limit fails for it.
    worker.current?.finish(
      worker.killedFor === undefined ? { kind: 'stopped' } : { kind: 'crashed', message: worker.killedFor },
    );
  }

  /**
   * Ends the processes the worker started (see process-tree.ts), and the worker itself unless `keepWorker`. Never
   * rejects: a failure is logged and the attempt ends anyway.
   */
  async #endStarted(worker: PoolWorker, keepWorker: boolean): Promise<void> {
    const tree = worker.channel.tree;
    try {
      await endTreeProcesses(tree, tree.leader !== undefined && keepWorker ? { keep: [tree.leader] } : {});
    } catch (error) {
      this.#o.logger.warn(
        { err: error as Error, lastExecutionId: worker.lastExecutionId },
        'could not end the processes a handler worker started',
      );
    }
  }

  #forget(worker: PoolWorker): void {
    clearTimeout(worker.idleTimer);
    this.#workers.delete(worker);
    const i = this.#idle.indexOf(worker);
    if (i >= 0) this.#idle.splice(i, 1);
    if (this.#workers.size === 0) this.#memoryWatch.stop();
  }

  #onMessage(worker: PoolWorker, message: FromWorker): void {
    if (message.type !== 'result') {
      relayMessage(worker, message, this.#o);
      return;
    }
    const running = worker.current;
    if (running?.attemptId !== message.attemptId) return;
    // Settled after its abort: the attempt is lost anyway; the worker is kept unless the daemon stops.
    if (running.aborted) this.#endAborted(worker, running, running.aborted === 'shutdown');
    else running.finish(hostResult(message.outcome, this.#o.redact));
  }

  #onExit(worker: PoolWorker, death: WorkerDeath): void {
    const wasGone = worker.gone;
    worker.gone = true;
    this.#forget(worker);
    if (wasGone) return; // terminated on purpose
    this.#o.events?.emit('handlerWorker', { started: false, reason: goneReason(worker, death) });
    const message = describeDeath(worker, death, this.#o);
    const running = worker.current;
    if (running) {
      // Its processes outlive it unless ended: they end before the attempt's outcome is taken.
      void this.#endStarted(worker, false).then(() =>
        running.finish(running.aborted ? { kind: 'stopped' } : { kind: 'crashed', message }),
      );
      return;
    }
    void this.#endStarted(worker, false);
    this.#o.logger.error(
      { lastExecutionId: worker.lastExecutionId, code: death.code, signal: death.signal },
      `a handler worker died between attempts: ${message}`,
    );
  }
}
