// Ties stray failures to the handler attempt that caused them. A rejection nobody awaits, or a throw from a
// callback, surfaces on the process; Node carries the async context into those events, so the daemon's
// process handlers can fail the attempt that leaked them instead of crashing or letting it report success.
import { AsyncLocalStorage } from 'node:async_hooks';

interface AttemptScope {
  fail(error: unknown): void;
}

const scope = new AsyncLocalStorage<AttemptScope>();

/** Runs `fn` (one handler attempt) so that `failCurrentAttempt` can reach it from any async continuation. */
export function runInAttemptScope<T>(fail: (error: unknown) => void, fn: () => T): T {
  return scope.run({ fail }, fn);
}

/** Fails the attempt in whose async context this is called; false when called outside any attempt. */
export function failCurrentAttempt(error: unknown): boolean {
  const current = scope.getStore();
  if (!current) return false;
  current.fail(error);
  return true;
}
