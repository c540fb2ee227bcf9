// The service's clock as this process can know it: the `Date` header of each answer, read against the local
// monotonic clock. Times the service sends (an execution's createdAt) are placed on the local timeline through
// it, never compared with the local wall clock, which may be minutes off the service's or step at any time.
import type { Clock } from './clock.ts';

/**
 * A `Date` header names the whole second its answer was made in; the answer reached us up to a round trip later.
 * Half a second is the middle of what the header allows.
 */
const DATE_RESOLUTION_MIDPOINT_MS = 500;

export class ServiceClock {
  readonly #clock: Pick<Clock, 'monotonic'>;
  /** The service's time minus the local monotonic time, from the last answer that carried a Date; undefined before. */
  #offsetMs: number | undefined;

  constructor(clock: Pick<Clock, 'monotonic'>) {
    this.#clock = clock;
  }

  /** Hears an answer's `Date` header; an absent or unreadable one teaches nothing. */
  observe(dateHeader: string | string[] | undefined): void {
    const raw = Array.isArray(dateHeader) ? dateHeader[0] : dateHeader;
    if (raw === undefined) return;
    const serviceMs = Date.parse(raw);
    if (Number.isNaN(serviceMs)) return;
    this.#offsetMs = serviceMs + DATE_RESOLUTION_MIDPOINT_MS - this.#clock.monotonic();
  }

  /** The service's clock now, in ms since the epoch; undefined until an answer carried a Date. */
  now(): number | undefined {
    return this.#offsetMs === undefined ? undefined : this.#clock.monotonic() + this.#offsetMs;
  }

  /**
   * The local monotonic instant at which the service's clock read `serviceMs` (e.g. an execution's createdAt),
   * never later than now; undefined until an answer carried a Date.
   */
  monotonicAt(serviceMs: number): number | undefined {
    if (this.#offsetMs === undefined || !Number.isFinite(serviceMs)) return undefined;
    return Math.min(this.#clock.monotonic(), serviceMs - this.#offsetMs);
  }
}
