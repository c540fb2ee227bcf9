// Handler isolation as the daemon wires it from its configuration (DF_HANDLER_ISOLATION, DF_HANDLER_MEMORY_MB).
import type { Logger } from 'pino';
import type { WorkerConfig } from '../config/schema.ts';
import { loadHandlersOrThrow, type LoadedHandler } from '../handlers/loader.ts';
import { inlineHost, type AttemptHost } from '../runner/attempt-host.ts';
import { redactor, type Redact } from '../runner/redact.ts';
import { withCompileCache } from './compile-cache.ts';
import { HandlerPool, type PoolObserver } from './handler-pool.ts';
import { loadHandlersIsolated } from './load-handlers.ts';
import { handlerEnvironment, secretValues } from './secrets.ts';

export { HandlerPool, type PoolObserver, type WorkerGoneReason } from './handler-pool.ts';
export { handlerEnvironment, secretValues, SECRET_VARIABLES } from './secrets.ts';
export { saveCompileCache } from './compile-cache.ts';

export interface Sandbox {
  /** Imports the handler modules: in a process with the handlers' environment, unless isolation is none. */
  loadHandlers(dir: string, logger: Logger): Promise<Map<string, LoadedHandler>>;
  host: AttemptHost;
  /** Cleans the daemon's secrets out of anything handler code produced. */
  redact: Redact;
  /** Terminates the handler workers (none with isolation `none`). */
  close(): Promise<void>;
}

export function sandboxFromConfig(
  config: Pick<WorkerConfig, 'api' | 'http' | 'handlers' | 'concurrency'>,
  logger: Logger,
  options: { env?: NodeJS.ProcessEnv; observer?: PoolObserver } = {},
): Sandbox {
  const secrets = secretValues(config);
  const redact = redactor(secrets);
  if (config.handlers.isolation === 'none') {
    return {
      loadHandlers: (dir, logger) => loadHandlersOrThrow(dir, { logger }),
      host: inlineHost,
      redact,
      close: () => Promise.resolve(),
    };
  }
  const env = withCompileCache(handlerEnvironment(options.env ?? process.env, secrets));
  const pool = new HandlerPool({
    isolation: config.handlers.isolation,
    memoryMb: config.handlers.memoryMb,
    env,
    logger,
    redact,
    maxIdle: config.concurrency,
    idleTimeoutMs: config.handlers.idleTimeoutMs,
    ...(options.observer ? { observer: options.observer } : {}),
  });
  return {
    loadHandlers: (dir, logger) => loadHandlersIsolated(dir, { env, logger }),
    host: pool,
    redact,
    close: () => pool.close(),
  };
}
