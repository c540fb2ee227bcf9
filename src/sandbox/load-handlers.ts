// Loads the handler modules in a process of their own (see load-worker.ts) and hands the daemon their
// declarations: what it needs to match tasks and plan polls. Their `handle` runs only in the handler pool.
// A process rather than a thread: what a thread allocated (stripping TypeScript, compiling the modules) stays
// in the daemon's malloc arenas after it ends, about 15 MB of idle RSS for good (bench:footprint).
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { Logger } from 'pino';
import type { KeyDescription } from '../api/types.ts';
import { HandlerLoadError, HandlerLoadErrors, HandlersDirectoryError } from '../handlers/load-errors.ts';
import type { LoadedHandler } from '../handlers/loader.ts';
import { raiseOomScore } from './process-memory.ts';
import { conditionFlags } from './worker-channel.ts';

export interface HandlerDeclaration {
  key: string;
  description: string;
  retryCount: number;
  inputKeys: KeyDescription[];
  outputKeys: KeyDescription[];
  timeoutMs?: number;
  concurrency?: number;
  file: string;
}

export type LoadReport =
  | { kind: 'loaded'; handlers: HandlerDeclaration[]; errors: Array<{ file: string; reason: string }> }
  | { kind: 'directory'; message: string }
  | { kind: 'failed'; message: string };

/** Longest a handler module's top-level code may take to import before start gives up, in ms. */
export const LOAD_TIMEOUT_MS = 60_000;

const ENTRY = new URL(
  import.meta.url.endsWith('.ts') ? './load-worker.ts' : './load-worker.js',
  import.meta.url,
);

/**
 * Like `loadHandlersOrThrow`, with the modules imported in a child process given `env`. Throws HandlersDirectoryError,
 * HandlerLoadErrors naming each broken file, or an Error when the import itself never finished.
 */
export async function loadHandlersIsolated(
  dir: string,
  options: { env: Record<string, string>; logger?: Logger; timeoutMs?: number },
): Promise<Map<string, LoadedHandler>> {
  const { handlers, errors } = await loadHandlersIsolatedPartly(dir, options);
  if (errors.length > 0) throw new HandlerLoadErrors(dir, errors);
  return handlers;
}

/**
 * Like `loadHandlersIsolated`, but the modules that load are returned beside an error for each that does not
 * (df-worker dev serves the first and reports the others). Still throws for an unusable directory.
 */
export async function loadHandlersIsolatedPartly(
  dir: string,
  options: { env: Record<string, string>; logger?: Logger; timeoutMs?: number },
): Promise<{ handlers: Map<string, LoadedHandler>; errors: HandlerLoadError[] }> {
  const report = await runLoadProcess(dir, options.env, options.timeoutMs ?? LOAD_TIMEOUT_MS);
  if (report.kind === 'directory') throw new HandlersDirectoryError(dir, report.message);
  if (report.kind === 'failed') throw new Error(`could not load the handlers in "${dir}": ${report.message}`);
  const errors = report.errors.map((e) => new HandlerLoadError(e.file, e.reason));
  const handlers = new Map<string, LoadedHandler>();
  for (const declaration of report.handlers) {
    handlers.set(declaration.key, {
      ...declaration,
      handle() {
        throw new Error(`task "${declaration.key}" runs only in a handler worker (${declaration.file})`);
      },
    });
  }
  if (options.logger) logLoadedHandlers(handlers, options.logger);
  return { handlers, errors };
}

/** One line per handler loaded, naming its task key and file. */
export function logLoadedHandlers(handlers: ReadonlyMap<string, LoadedHandler>, logger: Logger): void {
  for (const h of handlers.values()) logger.info({ taskKey: h.key, file: h.file }, 'loaded handler');
}

function runLoadProcess(dir: string, env: Record<string, string>, timeoutMs: number): Promise<LoadReport> {
  return new Promise((resolve, reject) => {
    const child = fork(fileURLToPath(ENTRY), [dir], {
      env,
      execArgv: conditionFlags(process.execArgv),
      // What a module prints at its top level reaches the daemon's output, as from a handler worker.
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    // Modules' top-level code runs here: at the container's memory limit, the kernel ends it, not the daemon.
    raiseOomScore(child.pid);
    let report: LoadReport | undefined;
    let error: Error | undefined;
    const timer = setTimeout(() => {
      error = new Error(
        `importing the handler modules in "${dir}" took over ${timeoutMs / 1000} s; ` +
          'a module blocks at its top level (move slow set-up into the handler)',
      );
      child.kill('SIGKILL');
    }, timeoutMs);
    child.on('message', (message: LoadReport) => {
      report = message;
      // A module may leave a timer or a socket open at its top level: the process is done once it reported.
      child.kill('SIGKILL');
    });
    child.on('error', (e: Error) => {
      error ??= e;
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      if (report) resolve(report);
      else
        reject(
          error ??
            new Error(
              `a handler module in "${dir}" ended its import ` +
                (code === null
                  ? `killed by ${signal ?? 'a signal'}`
                  : `with exit code ${code} (process.exit at its top level?)`),
            ),
        );
    });
  });
}
