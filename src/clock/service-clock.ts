// The service's clock as this process can know it: the `Date` header of each answer, read against the local
// monotonic clock. Times the service sends (an execution's createdAt) are placed on the local timeline through
// it, never compared with the local wall clock, which may be minutes off the service's or step at any time.
import type { Clock } from './clock.ts';

/**
 * A `Date` header names the whole second its answer was made in, and the answer reached us after it was made:
 * the service's clock at receipt is at least the header's instant. The highest such lower bound over the
 * answers is the estimate (it tightens as answers land at every phase of the second); a sample whose upper
 * bound (a second later, plus this much for the round trip) falls below it says the service's clock went
 * back, and the estimate starts again from it.
 */
const ROUND_TRIP_ALLOWANCE_MS = 1_000;
const DATE_RESOLUTION_MS = 1_000;
/**
 * Within this of the estimate, the local wall clock agrees with the service's as closely as a Date header can
 * tell, and reads createdAt to the millisecond: it is used then, the estimate only beyond it.
 */
const AGREEMENT_MS = DATE_RESOLUTION_MS + ROUND_TRIP_ALLOWANCE_MS;

export class ServiceClock {
  readonly #clock: Pick<Clock, 'now' | 'monotonic'>;
  /** The service's time minus the local monotonic time (a lower bound); undefined before any answer had a Date. */
  #offsetMs: number | undefined;

  constructor(clock: Pick<Clock, 'now' | 'monotonic'>) {
    this.#clock = clock;
  }

  /** Hears an answer's `Date` header as the answer arrives; an absent or unreadable one teaches nothing. */
  observe(dateHeader: string | string[] | undefined): void {
    const raw = Array.isArray(dateHeader) ? dateHeader[0] : dateHeader;
    if (raw === undefined) return;
    const serviceMs = Date.parse(raw);
    if (Number.isNaN(serviceMs)) return;
    const lowerMs = serviceMs - this.#clock.monotonic();
    const upperMs = lowerMs + DATE_RESOLUTION_MS + ROUND_TRIP_ALLOWANCE_MS;
    if (this.#offsetMs === undefined || lowerMs > this.#offsetMs || upperMs < this.#offsetMs) {
      this.#offsetMs = lowerMs;
    }
  }

  /** The service's clock now, in ms since the epoch; undefined until an answer carried a Date. */
  now(): number | undefined {
    return this.#offsetMs === undefined ? undefined : this.#clock.monotonic() + this.#offsetMs;
  }

  /**
   * The local monotonic instant at which the service's clock read `serviceMs` (e.g. an execution's createdAt),
   * never later than now; undefined until an answer carried a Date. While the local wall clock agrees with the
   * service's (see AGREEMENT_MS) it places the instant, to the millisecond; else the learnt offset does.
   */
  monotonicAt(serviceMs: number): number | undefined {
    if (this.#offsetMs === undefined || !Number.isFinite(serviceMs)) return undefined;
    const monotonicNow = this.#clock.monotonic();
    const wallNow = this.#clock.now();
    const agrees = Math.abs(monotonicNow + this.#offsetMs - wallNow) <= AGREEMENT_MS;
    const at = agrees ? monotonicNow - (wallNow - serviceMs) : serviceMs - this.#offsetMs;
    return Math.min(monotonicNow, at);
  }
}
