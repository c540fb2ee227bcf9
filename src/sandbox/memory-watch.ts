// Watches worker processes for memory off the heap (Buffers, native code), which a worker's heap limit does not
// bound: each one whose anonymous resident memory grew past DF_HANDLER_MEMORY_MB since its start is reported.
import { anonymousResidentMb } from './process-memory.ts';
import type { PoolWorker } from './pool-worker.ts';

export interface MemoryWatchOptions {
  /** The workers alive, read at each look. */
  workers: Iterable<PoolWorker>;
  /** Growth since the worker's start that is too much, in MB (DF_HANDLER_MEMORY_MB). */
  limitMb: number;
  /** Interval between two looks, in ms. */
  everyMs: number;
  /** Told of a worker over the limit, with how much it grew (MB); it is the caller's to end it. */
  over: (worker: PoolWorker, addedMb: number) => void;
}

export class MemoryWatch {
  readonly #options: MemoryWatchOptions;
  #timer: NodeJS.Timeout | undefined;

  constructor(options: MemoryWatchOptions) {
    this.#options = options;
  }

  /** Looks every `everyMs` from now on; nothing when it already does. */
  start(): void {
    if (this.#timer) return;
    const { workers, limitMb, everyMs, over } = this.#options;
    this.#timer = setInterval(() => {
      for (const worker of workers) {
        if (worker.startMb === undefined || worker.channel.pid === undefined) continue;
        const addedMb = (anonymousResidentMb(worker.channel.pid) ?? 0) - worker.startMb;
        if (addedMb > limitMb) over(worker, addedMb);
      }
    }, everyMs);
    // Never what keeps the daemon alive: a busy worker's channel does that.
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }
}
