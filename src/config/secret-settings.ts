// What handler code must never get hold of: the daemon's secret settings. Handlers run with a copy of the
// environment without them (sandbox/handler-environment.ts builds it), and whatever a handler returns, throws
// or logs is cleaned of their values (secrets/redact.ts) before the daemon logs or reports it.
import type { WorkerConfig } from './schema.ts';
import { listSettings } from './schema.ts';

/**
 * Variables a handler's environment never holds: every sensitive setting, the key file's path (the file is
 * the secret) and DF_CONFIG (a config file may carry the key).
 */
export const SECRET_VARIABLES: readonly string[] = [
  ...listSettings()
    .filter(({ entry }) => entry.sensitive === true)
    .map(({ entry }) => entry.env),
  'DF_API_KEY_FILE',
  'DF_CONFIG',
];

/** The secret values of a configuration; values too short to be told from ordinary text are left out. */
export function secretValues(
  config: Pick<WorkerConfig, 'api' | 'http'> & { cluster?: { sentinelPassword: string } },
): string[] {
  return [config.api.key, config.http.wakeToken, config.cluster?.sentinelPassword ?? ''].filter(
    (value) => value.length >= 4,
  );
}

/**
 * A copy of `env` for handler code: without the secret variables, and without any other variable whose value
 * holds a secret (a key copied into a variable of the user's own).
 */
export function handlerEnvironment(
  env: NodeJS.ProcessEnv,
  secrets: readonly string[],
): Record<string, string> {
  const scrubbed: Record<string, string> = {};
  for (const [name, value] of Object.entries(env)) {
    if (value === undefined || SECRET_VARIABLES.includes(name)) continue;
    if (secrets.some((secret) => value.includes(secret))) continue;
    scrubbed[name] = value;
  }
  return scrubbed;
}
