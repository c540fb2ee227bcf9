// Time as a dependency: everything that waits or compares instants takes a Clock, so tests and
// benchmarks can drive a month of budget in milliseconds with the very same code. A Clock has two faces:
// the wall clock, which names the month (and dates for display), and a monotonic clock, which measures every
// duration (windows, pauses, back-off, timeouts, pacing, leases) and never steps when the wall clock does.

export interface Clock {
  /** Wall clock: milliseconds since the Unix epoch. May step either way (NTP, an operator, a VM resumed). */
  now(): number;
  /**
   * Monotonic milliseconds: never steps, only moves forward. Its origin is the wall clock's reading when the
   * clock started, so its values read like epoch milliseconds, but only differences between them mean anything.
   */
  monotonic(): number;
  /** Resolves after `ms` milliseconds of this clock's monotonic time; rejects with the signal's reason when aborted. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

/** The wall-clock instant at `monotonicMs` on `clock`, read as of now (a later wall step moves it). */
export function wallAt(clock: Clock, monotonicMs: number): number {
  return clock.now() + (monotonicMs - clock.monotonic());
}

/** The monotonic instant at wall instant `wallMs` on `clock`, read as of now. */
export function monotonicAt(clock: Clock, wallMs: number): number {
  return clock.monotonic() + (wallMs - clock.now());
}

/** The longest delay one Node timer honours (2^31 - 1 ms, about 24.8 days); a longer one fires at once. */
const LONGEST_TIMER_MS = 2_147_483_647;

const monotonicOrigin = performance.timeOrigin;

export const systemClock: Clock = {
  now: () => Date.now(),
  // performance.now() reads CLOCK_MONOTONIC (as Node's timers do): a wall-clock step does not move it.
  monotonic: () => monotonicOrigin + performance.now(),
  // A longer wait (a month's end, a server's Retry-After) is a chain of timers, never one that overflows.
  sleep: (ms, signal) =>
    new Promise<void>((resolve, reject) => {
      if (signal?.aborted) {
        reject(signal.reason as Error);
        return;
      }
      const until = performance.now() + Math.max(0, ms);
      let timer: NodeJS.Timeout;
      const onAbort = () => {
        clearTimeout(timer);
        reject(signal?.reason as Error);
      };
      const arm = (delayMs: number) => {
        timer = setTimeout(
          () => {
            const leftMs = until - performance.now();
            if (leftMs > 0 && delayMs === LONGEST_TIMER_MS) return arm(Math.min(leftMs, LONGEST_TIMER_MS));
            signal?.removeEventListener('abort', onAbort);
            resolve();
          },
          Math.min(delayMs, LONGEST_TIMER_MS),
        );
      };
      arm(Math.min(Math.max(0, ms), LONGEST_TIMER_MS));
      signal?.addEventListener('abort', onAbort, { once: true });
    }),
};
