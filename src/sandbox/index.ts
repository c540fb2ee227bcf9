// Handler isolation as the daemon wires it from its configuration (DF_HANDLER_ISOLATION, DF_HANDLER_MEMORY_MB,
// DF_HANDLER_MAX_OUTPUT_BYTES).
import type { Logger } from 'pino';
import type { WorkerConfig } from '../config/schema.ts';
import type { LoadedHandler } from '../handlers/loader.ts';
import { inlineHost, withOutputLimit, type AttemptHost } from '../runner/attempt-host.ts';
import { redactor, type Redact } from '../secrets/redact.ts';
import { HandlerPool } from './handler-pool.ts';
import type { WorkerEvents } from '../events/worker-events.ts';
import { loadHandlersIsolated } from './load-handlers.ts';
export { loadHandlersIsolatedPartly } from './load-handlers.ts';
import { secretValues } from '../config/secret-settings.ts';
import { handlerEnvironmentFromConfig } from './handler-environment.ts';

export { HandlerPool, type WorkerGoneReason } from './handler-pool.ts';
export { handlerEnvironment, secretValues, SECRET_VARIABLES } from '../config/secret-settings.ts';
export { handlerEnvironmentFromConfig } from './handler-environment.ts';
export { saveCompileCache } from './compile-cache.ts';

export interface Sandbox {
  /** Imports the handler modules: in a process with the handlers' environment, unless isolation is none. */
  loadHandlers(dir: string, logger: Logger): Promise<Map<string, LoadedHandler>>;
  host: AttemptHost;
  /** Cleans the daemon's secrets out of anything handler code produced. */
  redact: Redact;
  /**
   * The handler files changed: attempts from now on import them afresh, those running keep their code. A no-op
   * with isolation `none`, where a module once imported stays for the life of the process.
   */
  retire(): void;
  /** Terminates the handler workers (none with isolation `none`). */
  close(): Promise<void>;
}

export function sandboxFromConfig(
  config: Pick<WorkerConfig, 'api' | 'http' | 'handlers' | 'concurrency'>,
  logger: Logger,
  options: {
    env?: NodeJS.ProcessEnv;
    /** Where handler workers' starts and ends are told. */
    events?: WorkerEvents;
    /** Secrets that appear while the daemon runs (the keys DF_API_KEY_FILE held); the same array until one does. */
    laterSecrets?: () => readonly string[];
  } = {},
): Sandbox {
  const secrets = secretValues(config);
  const redact = laterRedactor(secrets, options.laterSecrets);
  if (config.handlers.isolation === 'none') {
    return {
      // Imported here only: with isolation, handler modules load in a child process and the daemon's own
      // process never needs the loader (its idle memory, bench:footprint).
      loadHandlers: async (dir, logger) =>
        (await import('../handlers/loader.ts')).loadHandlersOrThrow(dir, { logger }),
      host: withOutputLimit(inlineHost, config.handlers.maxOutputBytes),
      redact,
      retire: () => undefined,
      close: () => Promise.resolve(),
    };
  }
  const env = handlerEnvironmentFromConfig(config, options.env);
  const pool = new HandlerPool({
    isolation: config.handlers.isolation,
    memoryMb: config.handlers.memoryMb,
    maxOutputBytes: config.handlers.maxOutputBytes,
    env,
    logger,
    redact,
    maxIdle: config.concurrency,
    idleTimeoutMs: config.handlers.idleTimeoutMs,
    ...(options.events ? { events: options.events } : {}),
  });
  return {
    loadHandlers: (dir, logger) => loadHandlersIsolated(dir, { env, logger }),
    host: pool,
    redact,
    retire: () => pool.retire(),
    close: () => pool.close(),
  };
}

/** Redacts `secrets` and whatever `later` holds, rebuilt only when `later` gives another array. */
function laterRedactor(secrets: readonly string[], later?: () => readonly string[]): Redact {
  const fixed = redactor(secrets);
  if (!later) return fixed;
  let seen: readonly string[] | undefined;
  let current = fixed;
  return (text) => {
    const extra = later();
    if (extra !== seen) {
      seen = extra;
      current = redactor([...secrets, ...extra.filter((value) => value.length >= 4)]);
    }
    return current(text);
  };
}
