// Shared set-up for runner tests: an execution as the service would hand it out, a logger that records its
// lines, and a driver that moves a ManualClock until the runner settles.
import { pino, type Logger } from 'pino';
import type { JsonObject, TaskExecution } from '../../src/api/types.ts';
import { flushMicrotasks, type ManualClock } from '../../src/clock/manual-clock.ts';

export function execution(input: JsonObject, id = 'exec-1'): TaskExecution {
  return {
    object: 'task_execution',
    id,
    taskId: 'task-1',
    status: 'IN_PROGRESS',
    input,
    createdAt: '2026-01-01T00:00:00.000Z',
  };
}

export interface RecordingLogger {
  logger: Logger;
  lines: Array<Record<string, unknown>>;
}

export function recordingLogger(): RecordingLogger {
  const lines: Array<Record<string, unknown>> = [];
  const logger = pino(
    { level: 'debug' },
    { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) },
  );
  return { logger, lines };
}

/** Advances the clock to each next sleeper until `promise` settles (timeouts and backoff take no real time). */
export async function drive<T>(clock: ManualClock, promise: Promise<T>): Promise<T> {
  let settled = false;
  promise.then(
    () => (settled = true),
    () => (settled = true),
  );
  for (let step = 0; step < 1000; step++) {
    await flushMicrotasks();
    if (settled) return promise;
    const next = clock.nextWakeAt;
    if (next !== undefined) await clock.advance(next - clock.now());
  }
  throw new Error('the runner did not settle within 1000 clock steps');
}

/** Waits until the code under test has parked `count` sleepers on the clock. */
export async function untilSleeping(clock: ManualClock, count = 1): Promise<void> {
  for (let turn = 0; turn < 100; turn++) {
    if (clock.pending >= count) return;
    await flushMicrotasks(1);
  }
  throw new Error(`expected ${count} sleeper(s) on the clock, found ${clock.pending}`);
}
