// Views of the schema and of a loaded configuration that are safe to print: the settings table for docs,
// and a configuration with its secrets masked for `check` and startup logs.
import { listSettings } from './schema.ts';
import type { WorkerConfig } from './schema.ts';

export interface SettingDescription {
  /** Dotted schema name, e.g. `budget.perMinute`. */
  setting: string;
  /** Environment variable, e.g. `DF_BUDGET_PER_MINUTE`. */
  env: string;
  default: unknown;
  /** What it does, its unit, the accepted values and the default. */
  doc: string;
}

/** Every setting in schema order, for generated documentation and `--help`. */
export function describeConfig(): SettingDescription[] {
  return listSettings().map(({ setting, entry }) => ({
    setting,
    env: entry.env,
    default: entry.default,
    doc: entry.doc,
  }));
}

export const REDACTED = '[redacted]';

const SENSITIVE_SETTINGS = listSettings()
  .filter(({ entry }) => entry.sensitive === true)
  .map(({ setting }) => setting.split('.'));

/** A copy of `config` with every sensitive setting (api.key, http.wakeToken) replaced by '[redacted]'. */
export function redactedConfig(config: WorkerConfig): object {
  const copy = structuredClone(config) as unknown as Record<string, unknown>;
  for (const path of SENSITIVE_SETTINGS) {
    let node: Record<string, unknown> | undefined = copy;
    for (const name of path.slice(0, -1)) {
      const child: unknown = node?.[name];
      node = typeof child === 'object' && child !== null ? (child as Record<string, unknown>) : undefined;
    }
    // Masked even when empty, so the output never tells whether a secret is set.
    if (node !== undefined) node[path.at(-1)!] = REDACTED;
  }
  return copy;
}
