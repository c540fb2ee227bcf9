// Time as a dependency: everything that waits or compares instants takes a Clock, so tests and
// benchmarks can drive a month of budget in milliseconds with the very same code.

export interface Clock {
  /** Milliseconds since the Unix epoch. */
  now(): number;
  /** Resolves after `ms` milliseconds of this clock's time; rejects with the signal's reason when aborted. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

/** The longest delay one Node timer honours (2^31 - 1 ms, about 24.8 days); a longer one fires at once. */
const LONGEST_TIMER_MS = 2_147_483_647;

export const systemClock: Clock = {
  now: () => Date.now(),
  // A longer wait (a month's end, a server's Retry-After) is a chain of timers, never one that overflows.
  sleep: (ms, signal) =>
    new Promise<void>((resolve, reject) => {
      if (signal?.aborted) {
        reject(signal.reason as Error);
        return;
      }
      const until = Date.now() + Math.max(0, ms);
      let timer: NodeJS.Timeout;
      const onAbort = () => {
        clearTimeout(timer);
        reject(signal?.reason as Error);
      };
      const arm = (delayMs: number) => {
        timer = setTimeout(
          () => {
            const leftMs = until - Date.now();
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
