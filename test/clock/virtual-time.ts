// What the unit tests of the daemon's core share: the emulator answering in process (no socket, no timer, so
// a request takes no wall-clock time), a seeded source of randomness, and a driver that moves the manual
// clock from sleeper to sleeper until the code under test is done.
import type { ServiceTransport } from '../../src/api/client.ts';
import { NetworkError } from '../../src/api/errors.ts';
import type { Answer } from '../../src/api/response.ts';
import type { OutgoingRequest } from '../../src/api/transport.ts';
import type { Operation } from '../../src/api/types.ts';
import type { ManualClock } from '../../src/clock/manual-clock.ts';
import type { Emulator } from '../../src/emulator/index.ts';

/**
 * Carries requests to `emulator.answer()`, as the month replay does. `beforeSend` runs before each request
 * reaches the emulator (to look at the world as the service sees it then). A dropped connection (the `drop`
 * and `dropAfterApply` faults) is a NetworkError, as from the real transport: the request was sent.
 */
export function inProcessTransport(
  emulator: Emulator,
  beforeSend?: (operation: Operation, request: OutgoingRequest) => void | Promise<void>,
): ServiceTransport {
  return {
    async send(operation, request): Promise<Answer> {
      if (typeof request.body !== 'string' && request.body !== undefined) {
        throw new Error('the in-process transport carries JSON bodies only');
      }
      await beforeSend?.(operation, request);
      const answer = await emulator.answer({
        method: request.method,
        path: request.path,
        headers: request.headers,
        ...(request.body === undefined ? {} : { body: request.body }),
      });
      if (!answer) {
        throw new NetworkError(
          operation,
          `${operation} failed: the connection closed unanswered`,
          undefined,
          {
            sent: true,
          },
        );
      }
      return { status: answer.status, headers: answer.headers, text: answer.body ?? '' };
    },
    close: () => Promise.resolve(),
  };
}

/** mulberry32: a small PRNG whose sequence depends only on its seed. Values in [0, 1). */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
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
