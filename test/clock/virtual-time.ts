// What the unit tests of the daemon's core share: the emulator answering in process (no socket, no timer, so
// a request takes no wall-clock time), a seeded source of randomness, and a driver that moves the manual
// clock from sleeper to sleeper until the code under test is done.
import { ServiceClient, type ServiceTransport } from '../../src/api/client.ts';
import { Budget, type BudgetLimits } from '../../src/budget/budget.ts';
import type { ManualClock } from '../../src/clock/manual-clock.ts';
import { mulberry32 } from '../../src/clock/seeded-random.ts';
import { inProcessTransport, type Emulator } from '../../src/emulator/index.ts';

export { inProcessTransport } from '../../src/emulator/index.ts';

/** A seeded source of randomness (mulberry32): the same draws on every run. Values in [0, 1). */
export const seededRandom = mulberry32;

/**
 * The service as a unit test's code under test reaches it: a Budget with these limits on `clock` (no safety
 * margin) and a ServiceClient carried to `emulator` in process (or by `transport`).
 */
export function serviceOnClock(
  emulator: Emulator,
  clock: ManualClock,
  options: { apiKey: string; limits: BudgetLimits; transport?: ServiceTransport },
): { budget: Budget; client: ServiceClient } {
  const budget = new Budget({ limits: options.limits, clock, safetyMarginMs: 0 });
  const client = new ServiceClient({
    baseUrl: 'http://service.invalid',
    apiKey: options.apiKey,
    clock,
    gate: budget,
    transport: options.transport ?? inProcessTransport(emulator),
  });
  return { budget, client };
}

/** Resolves after one macrotask turn: every promise chain already runnable (no I/O, no timer) has run. */
export function turn(): Promise<void> {
  return new Promise<void>((resolve) => setImmediate(resolve));
}

/** Longest a driver waits for real I/O (a journal's fsync on a busy disk) before it calls the code hung, in ms. */
const IO_BOUND_MS = 10_000;

/**
 * Resolves once `ready()` holds: at once for work that needs only promise turns, then, for real I/O in
 * flight, at each turn of the event loop (a millisecond apart, so as not to spin on a busy machine).
 */
async function waitFor(ready: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + IO_BOUND_MS;
  for (let turns = 0; !ready(); turns++) {
    if (Date.now() > deadline) throw new Error(`${what} within ${IO_BOUND_MS} ms`);
    if (turns < 100) await turn();
    else await new Promise((resolve) => setTimeout(resolve, 1));
  }
}

/**
 * Moves the manual clock until `done()` holds: lets whatever is runnable run (real I/O included, such as a
 * journal's file writes), and only when the code waits on the clock alone moves time to the earliest sleeper.
 * Fails when the code neither gets there nor sleeps (a hang), or takes more than `maxWakes` wakes.
 */
export async function driveClockUntil(
  clock: ManualClock,
  done: () => boolean,
  maxWakes = 1_000,
): Promise<void> {
  for (let wakes = 0; ; wakes++) {
    await waitFor(() => done() || clock.pending > 0, 'the code neither got there nor waited on the clock');
    // A few more turns: a sleeper may be one that the same continuation cancels at once (an attempt's timer).
    for (let i = 0; i < 3 && !done(); i++) await turn();
    if (done()) return;
    if (wakes >= maxWakes)
      throw new Error(`the code did not get there within ${maxWakes} wakes of the clock`);
    clock.wakeNext();
  }
}

/** Runs `work` to its end on the manual clock (see driveClockUntil). */
export async function runOnClock<T>(clock: ManualClock, work: Promise<T>, maxWakes = 1_000): Promise<T> {
  let settled = false;
  const watched = work.finally(() => {
    settled = true;
  });
  watched.catch(() => undefined);
  await driveClockUntil(clock, () => settled, maxWakes);
  return watched;
}
