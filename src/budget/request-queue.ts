// The requests waiting for the budget, in the order they may go: by class (reports first, polls last), then
// by arrival. A request whose signal aborts leaves the queue at once, rejected with the signal's reason.
import type { SendPermit } from '../api/client.ts';
import type { RequestClass } from './request-class.ts';

/** Queue order: a lower number is let through first. */
const PRIORITY: Record<RequestClass, number> = { report: 0, control: 1, handler: 2, poll: 3 };

export interface Waiter {
  readonly cls: RequestClass;
  /** Arrival order, within its class. */
  readonly seq: number;
  resolve: (permit: SendPermit) => void;
  reject: (error: Error) => void;
}

export class RequestQueue implements Iterable<Waiter> {
  readonly #waiters: Waiter[] = [];
  readonly #onAbort: () => void;
  #seq = 0;

  /** `onAbort` is told when a waiter left because its signal aborted: the head may have changed. */
  constructor(onAbort: () => void) {
    this.#onAbort = onAbort;
  }

  get length(): number {
    return this.#waiters.length;
  }

  /** The waiter that goes next. */
  get head(): Waiter | undefined {
    return this.#waiters[0];
  }

  [Symbol.iterator](): Iterator<Waiter> {
    return this.#waiters[Symbol.iterator]();
  }

  /** The first `count` waiters, in queue order. */
  first(count: number): Waiter[] {
    return this.#waiters.slice(0, count);
  }

  /** Takes a waiter out of the queue (without settling it); false when it had already left. */
  remove(waiter: Waiter): boolean {
    const i = this.#waiters.indexOf(waiter);
    if (i < 0) return false;
    this.#waiters.splice(i, 1);
    return true;
  }

  /** Queues a request of class `cls`; the promise settles when the budget resolves or rejects its waiter. */
  add(cls: RequestClass, signal: AbortSignal | undefined): Promise<SendPermit> {
    return new Promise<SendPermit>((resolve, reject) => {
      const onAbort = () => {
        if (this.remove(waiter)) {
          reject(signal?.reason as Error);
          this.#onAbort();
        }
      };
      // The daemon passes the same long-lived signal with every request: a settled waiter must let go of it.
      const waiter: Waiter = {
        cls,
        seq: this.#seq++,
        resolve: (permit) => {
          signal?.removeEventListener('abort', onAbort);
          resolve(permit);
        },
        reject: (error) => {
          signal?.removeEventListener('abort', onAbort);
          reject(error);
        },
      };
      this.#waiters.push(waiter);
      this.#waiters.sort((a, b) => PRIORITY[a.cls] - PRIORITY[b.cls] || a.seq - b.seq);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }
}
