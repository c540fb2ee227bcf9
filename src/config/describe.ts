// Views of the schema and of a loaded configuration that are safe to print: the settings table for docs,
// and a configuration with its secrets masked for `check` and startup logs.
import { REDACTED, redactUrl } from '../secrets/redact.ts';
import { FORMAT } from './formats.ts';
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

const SENSITIVE_SETTINGS = listSettings()
  .filter(({ entry }) => entry.sensitive === true)
  .map(({ setting }) => setting.split('.'));

const URL_SETTINGS = listSettings()
  .filter(({ entry }) => entry.format === FORMAT.httpUrl || entry.format === FORMAT.redisUrl)
  .map(({ setting }) => setting.split('.'));

/** The object holding the last name of `path` under `root`, when every step on the way is an object. */
function parentOf(root: Record<string, unknown>, path: string[]): Record<string, unknown> | undefined {
  let node: Record<string, unknown> | undefined = root;
  for (const name of path.slice(0, -1)) {
    const child: unknown = node?.[name];
    node = typeof child === 'object' && child !== null ? (child as Record<string, unknown>) : undefined;
  }
  return node;
}

/**
 * A copy of `config` with every sensitive setting (api.key, http.wakeToken) replaced by REDACTED and the
 * credentials, query and fragment of every URL setting (api.url) masked.
 */
export function redactedConfig(config: WorkerConfig): object {
  const copy = structuredClone(config) as unknown as Record<string, unknown>;
  for (const path of SENSITIVE_SETTINGS) {
    const node = parentOf(copy, path);
    // Masked even when empty, so the output never tells whether a secret is set.
    if (node !== undefined) node[path.at(-1)!] = REDACTED;
  }
  for (const path of URL_SETTINGS) {
    const node = parentOf(copy, path);
    const value = node?.[path.at(-1)!];
    if (node !== undefined && typeof value === 'string') node[path.at(-1)!] = redactUrl(value);
  }
  return copy;
}
