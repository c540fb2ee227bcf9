// Shared set-up for daemon tests: an emulator on loopback, a config pointing at it, a temp state folder,
// and an in-process Worker with handlers defined in the test.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
export { maxInWindow } from '../../src/budget/sliding-window.ts';
export { busiestWindow } from '../../src/emulator/index.ts';
import { loadConfig } from '../../src/config/load.ts';
import type { WorkerConfig } from '../../src/config/schema.ts';
import { standaloneDaemon, type StandaloneDaemon } from '../../src/standalone/standalone-mode.ts';
import { Emulator, type EmulatorOptions } from '../../src/emulator/index.ts';
import { defineTask, type TaskModule, type TaskSpec } from '../../src/handlers/define-task.ts';

export const TEST_KEY = 'test-key';

export interface Harness {
  emulator: Emulator;
  config: WorkerConfig;
  stateDir: string;
  worker: StandaloneDaemon;
  logs: Record<string, unknown>[];
  close(): Promise<void>;
}

export async function startHarness(options: {
  emulator?: EmulatorOptions;
  settings?: Record<string, unknown>;
  handlers: TaskSpec[];
  /** Create the handlers' tasks on the emulator before the worker starts. Default true. */
  createTasks?: boolean;
  /** Handlers whose task is not created (the worker then refreshes the task list every DF_TASK_REFRESH_MS). */
  withoutTask?: string[];
  start?: boolean;
}): Promise<Harness> {
  const emulator = new Emulator({ apiKeys: [TEST_KEY], ...options.emulator });
  const url = await emulator.listen();
  const stateDir = await mkdtemp(join(tmpdir(), 'df-worker-test-'));
  const config = loadConfig({
    env: {},
    overrides: {
      'api.url': url,
      'api.key': TEST_KEY,
      'state.dir': stateDir,
      'http.port': 0,
      'log.level': 'debug',
      'scheduler.retryBaseMs': 10,
      'scheduler.errorBackoffMaxMs': 200,
      ...options.settings,
    },
    require: 'service',
  });
  const modules = new Map<string, TaskModule>(options.handlers.map((spec) => [spec.key, defineTask(spec)]));
  if (options.createTasks ?? true) {
    for (const m of modules.values()) {
      if (options.withoutTask?.includes(m.key)) continue;
      emulator.createTask({
        key: m.key,
        retryCount: m.retryCount,
        inputKeys: m.inputKeys,
        outputKeys: m.outputKeys,
      });
    }
  }
  const logs: Record<string, unknown>[] = [];
  const logger = pino(
    { level: 'debug' },
    { write: (line: string) => logs.push(JSON.parse(line) as Record<string, unknown>) },
  );
  const worker = standaloneDaemon({ config, logger, handlers: modules });
  if (options.start ?? true) await worker.start();
  return {
    emulator,
    config,
    stateDir,
    worker,
    logs,
    async close() {
      await worker.stop();
      await emulator.close();
      await rm(stateDir, { recursive: true, force: true });
    },
  };
}

/** Waits until `condition` holds, checking every 20 ms; fails with `what` after `timeoutMs`. */
export async function waitFor(condition: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
