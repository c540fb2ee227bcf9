// Runs handler attempts in a pool of workers (threads or child processes), one attempt per worker at a time,
// so the daemon's event loop (budget, polls, reports, health, metrics) never waits on handler code. A worker
// whose handler overruns its deadline without yielding, exhausts its heap, calls process.exit or crashes is
// terminated or replaced; only that attempt fails. A worker process is also watched for memory off the heap
// (Buffers, native code): one past DF_HANDLER_MEMORY_MB beyond its start is killed.
import type { Logger } from 'pino';
import { pino } from 'pino';
import {
  inlineHost,
  withOutputLimit,
  type AttemptHost,
  type AttemptSpec,
  type HostResult,
} from '../runner/attempt-host.ts';
import { HandlerTimeoutError } from '../runner/errors.ts';
import { NonRetryableError } from '../handlers/define-task.ts';
import { redactDeep, type Redact } from '../runner/redact.ts';
import { toErrorRecord } from '../api/error-record.ts';
import { performServiceCall, ServiceCallRefusedError, type ServiceCall } from '../handlers/task-service.ts';
import { anonymousResidentMb, oomKillCount } from './process-memory.ts';
import { ATTEMPT_BINDING, type FromWorker, type SerializedError, type WorkerOutcome } from './protocol.ts';
import { openChannel, type Isolation, type WorkerChannel, type WorkerDeath } from './worker-channel.ts';

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
  /** How long an aborted attempt's `ctx.signal` has to stop the handler before its worker is terminated. */
  abortSettleMs?: number;
  /** How long a worker still starting when its attempt was aborted may take to start. Default: START_BACKSTOP_MS. */
  startBackstopMs?: number;
  /**
   * How long an attempt waits for a busy worker to free before another worker is started, in ms: a new worker
   * costs its memory and 0.1 to 0.3 s before its first attempt, while quick handlers free theirs sooner, so a
   * backlog of them is drained by one or two warm workers. Default: DEFAULT_SPAWN_AFTER_MS.
   */
  spawnAfterMs?: number;
  observer?: PoolObserver;
}

export interface PoolObserver {
  /** A worker was started (`spawned`) or went away; `reason` says why for the latter. */
  workerStarted?(): void;
  workerGone?(reason: WorkerGoneReason): void;
}

export type WorkerGoneReason = 'terminated' | 'timeout' | 'out-of-memory' | 'exit' | 'crash' | 'idle';

interface PoolWorker {
  channel: WorkerChannel;
  /** The attempt running on it. */
  current: Running | undefined;
  lastExecutionId: string | undefined;
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

interface Running {
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

/** An attempt waiting for a free worker. */
interface Waiting {
  spec: AttemptSpec;
  file: string;
  signal: AbortSignal;
  resolve: (result: Promise<HostResult> | HostResult) => void;
  timer: NodeJS.Timeout;
  onAbort: () => void;
}

export const DEFAULT_ABORT_SETTLE_MS = 1_000;
/**
 * How long a worker still starting when its attempt was aborted may take to start before it is terminated: its
 * handler cannot hear the abort before then, so the settle time counts from its start. A child process takes
 * 0.2 to 0.5 s to start, seconds on a loaded machine; this only catches one that never does.
 */
export const START_BACKSTOP_MS = 15_000;
export const DEFAULT_SPAWN_AFTER_MS = 50;
/**
 * How often a worker process's memory is read, in ms: a handler filling Buffers at a few GB/s may pass its limit
 * by that much before it is killed; past the container's limit, the kernel ends the handler process instead
 * (process-memory.ts, HANDLER_OOM_SCORE_ADJ).
 */
export const MEMORY_WATCH_MS = 100;

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
  #memoryWatch: NodeJS.Timeout | undefined;

  constructor(options: HandlerPoolOptions) {
    this.#o = options;
    this.#inline =
      options.maxOutputBytes === undefined ? inlineHost : withOutputLimit(inlineHost, options.maxOutputBytes);
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
        logLevel: spec.logger.level,
        ...(this.#o.maxOutputBytes === undefined ? {} : { maxOutputBytes: this.#o.maxOutputBytes }),
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
      running.finish({ kind: 'stopped' });
      return;
    }
    // Still current while it is terminated, so its exit is not taken for a crash of the attempt.
    void this.#terminate(worker, running.aborted === 'timeout' ? 'timeout' : 'terminated').then(() =>
      running.finish({ kind: 'stopped' }),
    );
  }

  #spawn(): PoolWorker {
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
      oomKillsAtStart: this.#o.isolation === 'process' ? oomKillCount() : undefined,
      killedFor: undefined,
    };
    worker.channel = openChannel({
      isolation: this.#o.isolation,
      memoryMb: this.#o.memoryMb,
      env: this.#o.env,
      onMessage: (message) => this.#onMessage(worker, message),
      onExit: (death) => this.#onExit(worker, death),
    });
    this.#workers.add(worker);
    this.#o.observer?.workerStarted?.();
    if (this.#o.isolation === 'process') this.#watchMemory();
    return worker;
  }

  #watchMemory(): void {
    if (this.#memoryWatch) return;
    this.#memoryWatch = setInterval(() => {
      for (const worker of this.#workers) {
        if (worker.startMb === undefined || worker.channel.pid === undefined) continue;
        const addedMb = (anonymousResidentMb(worker.channel.pid) ?? 0) - worker.startMb;
        if (addedMb > this.#o.memoryMb) this.#killOverLimit(worker, addedMb);
      }
    }, this.#o.memoryWatchMs ?? MEMORY_WATCH_MS);
    // Never what keeps the daemon alive: a busy worker's channel does that.
    this.#memoryWatch.unref();
  }

  #killOverLimit(worker: PoolWorker, addedMb: number): void {
    worker.killedFor =
      `handler ran out of memory: its worker process held ${Math.round(addedMb)} MB more than when it started ` +
      `(heap and off-heap: Buffers, native memory), over the ${this.#o.memoryMb} MB limit ` +
      '(DF_HANDLER_MEMORY_MB), and was killed and replaced';
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
      this.#o.observer?.workerGone?.(reason);
    }
    await worker.channel.terminate();
    // An attempt still on it (close() while it ran) ends `stopped`: its exit is not reported as a crash. One
    // whose worker went over its memory limit fails for it.
    worker.current?.finish(
      worker.killedFor === undefined ? { kind: 'stopped' } : { kind: 'crashed', message: worker.killedFor },
    );
  }

  #forget(worker: PoolWorker): void {
    clearTimeout(worker.idleTimer);
    this.#workers.delete(worker);
    const i = this.#idle.indexOf(worker);
    if (i >= 0) this.#idle.splice(i, 1);
    if (this.#workers.size === 0) {
      clearInterval(this.#memoryWatch);
      this.#memoryWatch = undefined;
    }
  }

  #onMessage(worker: PoolWorker, message: FromWorker): void {
    switch (message.type) {
      case 'result': {
        const running = worker.current;
        if (running?.attemptId !== message.attemptId) return;
        // Settled after its abort: the attempt is lost anyway; the worker is kept unless the daemon stops.
        if (running.aborted) this.#endAborted(worker, running, running.aborted === 'shutdown');
        else running.finish(this.#hostResult(message.outcome));
        return;
      }
      case 'service-call':
        void this.#serviceCall(worker, message.attemptId, message.callId, message);
        return;
      case 'log':
        this.#relayLog(worker, message.line);
        return;
      case 'stray': {
        const err = this.#rebuildError(message.error);
        this.#o.logger.error(
          { executionId: message.executionId, origin: message.origin, err },
          message.afterAttempt
            ? `handler code failed after its attempt ended (${message.origin}); the outcome already taken stands`
            : `handler code failed outside any attempt (${message.origin})`,
        );
        return;
      }
      case 'exit-called':
        worker.exitCode = message.code;
        return;
      case 'ready': {
        worker.ready = true;
        // Before any handler code ran in it: what Node.js and the worker's own modules hold.
        if (this.#o.isolation === 'process' && worker.channel.pid !== undefined) {
          worker.startMb = anonymousResidentMb(worker.channel.pid);
        }
        const whenReady = worker.whenReady;
        worker.whenReady = undefined;
        whenReady?.();
        return;
      }
    }
  }

  #onExit(worker: PoolWorker, death: WorkerDeath): void {
    const wasGone = worker.gone;
    worker.gone = true;
    this.#forget(worker);
    if (wasGone) return; // terminated on purpose
    const reason: WorkerGoneReason =
      death.outOfMemory || this.#killedByKernel(worker, death)
        ? 'out-of-memory'
        : worker.exitCode !== undefined
          ? 'exit'
          : 'crash';
    this.#o.observer?.workerGone?.(reason);
    const message = this.#describeDeath(worker, death);
    const running = worker.current;
    if (running) {
      running.finish(running.aborted ? { kind: 'stopped' } : { kind: 'crashed', message });
      return;
    }
    this.#o.logger.error(
      { lastExecutionId: worker.lastExecutionId, code: death.code, signal: death.signal },
      `a handler worker died between attempts: ${message}`,
    );
  }

  /** Died of SIGKILL that the pool did not send, while the cgroup counted an OOM kill: the container's limit. */
  #killedByKernel(worker: PoolWorker, death: WorkerDeath): boolean {
    if (death.signal !== 'SIGKILL' || worker.oomKillsAtStart === undefined) return false;
    return (oomKillCount() ?? 0) > worker.oomKillsAtStart;
  }

  #describeDeath(worker: PoolWorker, death: WorkerDeath): string {
    const what = this.#o.isolation === 'thread' ? 'worker thread' : 'worker process';
    if (this.#killedByKernel(worker, death)) {
      return (
        "handler ran out of memory: the kernel's out-of-memory killer ended its worker process (the container's " +
        `memory limit was reached; each worker may hold DF_HANDLER_MEMORY_MB=${this.#o.memoryMb} MB more than ` +
        'Node.js itself, DF_CONCURRENCY of them at once) and it was replaced'
      );
    }
    if (death.outOfMemory) {
      return (
        `handler ran out of memory: its ${what} reached the ${this.#o.memoryMb} MB heap limit ` +
        '(DF_HANDLER_MEMORY_MB) and was replaced'
      );
    }
    if (worker.exitCode !== undefined) {
      return `handler called process.exit(${worker.exitCode}); its ${what} was replaced`;
    }
    if (death.error) return `handler ${what} crashed: ${this.#o.redact(death.error.message)}`;
    if (death.signal) return `handler ${what} was killed by ${death.signal}`;
    return `handler ${what} exited with code ${death.code ?? 'unknown'}`;
  }

  #hostResult(outcome: WorkerOutcome): HostResult {
    switch (outcome.kind) {
      case 'returned':
        return { kind: 'returned', value: outcome.output };
      case 'unusable':
        return outcome;
      case 'threw':
        return { kind: 'threw', error: this.#rebuildError(outcome.error) };
    }
  }

  /** An Error standing for the one thrown in the worker: its name, message and stack, redacted. */
  #rebuildError(serialized: SerializedError): Error {
    const message = this.#o.redact(serialized.message);
    const error = serialized.nonRetryable ? new NonRetryableError(message) : new Error(message);
    error.name = serialized.name;
    if (serialized.stack !== undefined) error.stack = this.#o.redact(serialized.stack);
    else delete error.stack;
    return error;
  }

  /**
   * Performs a `ctx.service` call of the attempt running on `worker` with the handlers' client, and sends its
   * answer back. A call from an attempt that is no longer running (or was aborted) is refused unsent.
   */
  async #serviceCall(
    worker: PoolWorker,
    attemptId: number,
    callId: number,
    call: ServiceCall,
  ): Promise<void> {
    const running = worker.current;
    let answer: { ok: true; value: unknown } | { ok: false; error: ReturnType<typeof toErrorRecord> };
    try {
      if (running?.attemptId !== attemptId || running.aborted || running.signal.aborted) {
        throw new ServiceCallRefusedError(
          `ctx.service ${call.operation} was not sent: its attempt has ended or was aborted`,
        );
      }
      const client = running.spec.service;
      if (client === undefined) {
        throw new ServiceCallRefusedError(
          `ctx.service ${call.operation} was not sent: no service is set up for this worker`,
        );
      }
      answer = { ok: true, value: await performServiceCall(client, call, running.signal) };
    } catch (error) {
      answer = { ok: false, error: toErrorRecord(error) };
    }
    if (!worker.gone) worker.channel.send({ type: 'service-result', callId, ...answer });
  }

  /** Writes a line the handler logged through ctx.logger with its attempt's logger, redacted. */
  #relayLog(worker: PoolWorker, line: string): void {
    let record: Record<string, unknown>;
    try {
      record = JSON.parse(line) as Record<string, unknown>;
    } catch {
      return;
    }
    const { level, msg, [ATTEMPT_BINDING]: attemptId, ...fields } = record;
    const running = worker.current;
    const logger =
      running !== undefined && running.attemptId === attemptId
        ? running.spec.logger
        : this.#o.logger.child({ executionId: worker.lastExecutionId, afterAttempt: true });
    const label = typeof level === 'number' ? pino.levels.labels[level] : undefined;
    const write = label === undefined ? logger.info : logger[label as pino.Level];
    write.call(
      logger,
      redactDeep(fields, this.#o.redact),
      this.#o.redact(typeof msg === 'string' ? msg : ''),
    );
  }
}
