// A clock that only moves when told to: `advance()` runs every sleeper whose time has come, in order.
// Shipped in src/ (not test/) because benchmarks and the month simulation drive the daemon with it. Both faces
// move together with `advance()`; `step()` moves the wall clock alone, as NTP or an operator would.
import type { Clock } from './clock.ts';

interface Sleeper {
  wakeAt: number;
  seq: number;
  resolve: () => void;
}

export class ManualClock implements Clock {
  #now: number;
  /** The monotonic face: starts at the wall reading and moves only forward, with `advance()`. */
  #monotonic: number;
  #sleepers: Sleeper[] = [];
  #seq = 0;

  constructor(startMs = Date.UTC(2026, 0, 1)) {
    this.#now = startMs;
    this.#monotonic = startMs;
  }

  now(): number {
    return this.#now;
  }

  monotonic(): number {
    return this.#monotonic;
  }

  /** Steps the wall clock alone by `ms` (negative: back); no sleeper wakes and the monotonic face stays. */
  step(ms: number): void {
    this.#now += ms;
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) return Promise.reject(signal.reason as Error);
    return new Promise<void>((resolve, reject) => {
      const onAbort = () => {
        this.#sleepers = this.#sleepers.filter((s) => s !== sleeper);
        reject(signal?.reason as Error);
      };
      const sleeper: Sleeper = {
        wakeAt: this.#monotonic + Math.max(0, ms),
        seq: this.#seq++,
        resolve: () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        },
      };
      this.#sleepers.push(sleeper);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** Number of pending sleepers (useful to wait until the code under test is parked). */
  get pending(): number {
    return this.#sleepers.length;
  }

  /** The monotonic instant the earliest sleeper wakes, or undefined when nobody sleeps. */
  get nextWakeAt(): number | undefined {
    let next: number | undefined;
    for (const s of this.#sleepers) if (next === undefined || s.wakeAt < next) next = s.wakeAt;
    return next;
  }

  /** Moves time forward by `ms`, waking sleepers in time order and letting their continuations run. */
  async advance(ms: number): Promise<void> {
    // Work already scheduled at the current instant runs there, before time moves.
    await flushMicrotasks();
    const target = this.#monotonic + ms;
    for (;;) {
      const next = this.nextWakeAt;
      if (next === undefined || next > target) break;
      this.wakeNext();
      await flushMicrotasks();
    }
    this.#moveTo(target);
    await flushMicrotasks();
  }

  /**
   * Moves time to the earliest sleeper's instant and wakes every sleeper due then, without waiting for their
   * continuations: the caller lets them run (the month replay, which steps through a month this way). False
   * when nobody sleeps.
   */
  wakeNext(): boolean {
    const next = this.nextWakeAt;
    if (next === undefined) return false;
    this.#moveTo(Math.max(this.#monotonic, next));
    const due = this.#sleepers
      .filter((s) => s.wakeAt <= this.#monotonic)
      .sort((a, b) => a.wakeAt - b.wakeAt || a.seq - b.seq);
    this.#sleepers = this.#sleepers.filter((s) => s.wakeAt > this.#monotonic);
    for (const s of due) s.resolve();
    return true;
  }

  /** Sets the wall clock to `ms`, moving the monotonic face by as much (forward only). */
  set(ms: number): void {
    this.#monotonic += Math.max(0, ms - this.#now);
    this.#now = ms;
  }

  /** Moves both faces to monotonic instant `target`, the wall clock by as much. */
  #moveTo(target: number): void {
    this.#now += target - this.#monotonic;
    this.#monotonic = target;
  }
}

/** Lets promise chains settle; a few macrotask turns cover continuations that await several times. */
export async function flushMicrotasks(turns = 3): Promise<void> {
  for (let i = 0; i < turns; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}
