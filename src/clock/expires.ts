// A bounded wait on any clock: how long a drain, a stop or a hand-over may take before the caller moves on.
import type { Clock } from './clock.ts';

/** True when `ms` ran out on `clock` before `promise` settled (either way). */
export async function expires(clock: Clock, promise: Promise<unknown>, ms: number): Promise<boolean> {
  const timer = new AbortController();
  const expired = clock.sleep(ms, timer.signal).then(
    () => true,
    () => false,
  );
  const settled = promise.then(
    () => false,
    () => false,
  );
  const result = await Promise.race([settled, expired]);
  timer.abort();
  return result;
}
