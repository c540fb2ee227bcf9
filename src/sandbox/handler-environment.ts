// The environment handler code runs with: the daemon's, without its secrets (config/secret-settings.ts), plus
// the compile cache the handler workers share.
import type { WorkerConfig } from '../config/schema.ts';
import { handlerEnvironment, secretValues } from '../config/secret-settings.ts';
import { withCompileCache } from './compile-cache.ts';

/** The environment handler code gets (the daemon's without its secrets), for loading modules as the pool does. */
export function handlerEnvironmentFromConfig(
  config: Pick<WorkerConfig, 'api' | 'http'>,
  env: NodeJS.ProcessEnv = process.env,
): Record<string, string> {
  return withCompileCache(handlerEnvironment(env, secretValues(config)));
}
