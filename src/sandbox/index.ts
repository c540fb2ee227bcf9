// Handler isolation as the daemon wires it from its configuration (DF_HANDLER_ISOLATION, DF_HANDLER_MEMORY_MB).
import type { Logger } from 'pino';
import type { WorkerConfig } from '../config/schema.ts';
import { inlineHost, type AttemptHost } from '../runner/attempt-host.ts';
import { redactor, type Redact } from '../runner/redact.ts';
import { HandlerPool, type PoolObserver } from './handler-pool.ts';
import { handlerEnvironment, secretValues } from './secrets.ts';

export { HandlerPool, type PoolObserver, type WorkerGoneReason } from './handler-pool.ts';
export { handlerEnvironment, secretValues, SECRET_VARIABLES } from './secrets.ts';

export interface Sandbox {
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
    return { host: inlineHost, redact, close: () => Promise.resolve() };
  }
  const pool = new HandlerPool({
    isolation: config.handlers.isolation,
    memoryMb: config.handlers.memoryMb,
    env: handlerEnvironment(options.env ?? process.env, secrets),
    logger,
    redact,
    maxIdle: config.concurrency,
    ...(options.observer ? { observer: options.observer } : {}),
  });
  return { host: pool, redact, close: () => pool.close() };
}
