// The local web console of df-worker dev and df-worker emulator, loaded only by them (dynamic import), never by
// the daemon's start. See console-pages.ts for its routes and sources.ts for where its figures come from.
import type { WorkerEvents } from '../events/worker-events.ts';
import type { StandaloneDaemon } from '../standalone/standalone-mode.ts';
import type { Emulator } from '../emulator/emulator.ts';
import { UsageSamples } from './budget-chart.ts';
import { consolePages, CONSOLE_PATH } from './console-pages.ts';
import { ExecutionRecorder } from './execution-record.ts';
import type { ConsoleSources } from './sources.ts';

export { CONSOLE_PATH } from './console-pages.ts';
export { ExecutionRecorder } from './execution-record.ts';

export interface LocalConsole {
  /** Records attempts and their log lines, heard from `events` and from `logStream`. */
  recorder: ExecutionRecorder;
  /** The destination of the daemon's JSON lines that the recorder reads (a tee of its logger). */
  logStream: { write(line: string): void };
  /** The worker whose budget and dead letters show, once it runs. */
  attachWorker(worker: StandaloneDaemon): void;
  /** The console's URL with the admin token in its fragment (never sent to the server, kept by the page). */
  url(emulatorUrl: string, adminToken: string | undefined): string;
}

/**
 * Mounts the console on the emulator's server under /console. With `events` (df-worker dev), a worker runs in
 * this process: its attempts are recorded from its events, before it claims anything.
 */
export function mountConsole(
  emulator: Emulator,
  options: { mode: string; events?: WorkerEvents },
): LocalConsole {
  const recorder = new ExecutionRecorder();
  const sources: ConsoleSources = { service: emulator, samples: new UsageSamples() };
  let worker: StandaloneDaemon | undefined;
  if (options.events) {
    recorder.listen(options.events);
    sources.worker = {
      recorder,
      budget: () => worker?.budget?.snapshot(),
      deadLetters: () => worker?.mode.deadLetters() ?? Promise.resolve([]),
      retryDeadLetter: (id) =>
        worker?.mode.retryDeadLetter(id) ??
        Promise.resolve({ delivered: false, message: 'the worker is not running' }),
      discardDeadLetter: (id) => worker?.mode.discardDeadLetter(id) ?? Promise.resolve(false),
    };
  }
  emulator.mount(
    consolePages({ sources, authorized: (header) => emulator.adminAuthorized(header), mode: options.mode }),
  );
  return {
    recorder,
    logStream: { write: (line) => recorder.logLine(line) },
    attachWorker(running) {
      worker = running;
    },
    url: (emulatorUrl, adminToken) =>
      `${emulatorUrl}${CONSOLE_PATH}${adminToken === undefined ? '' : `#token=${adminToken}`}`,
  };
}
