// Loads the configuration: schema defaults < package config/default.json < DF_CONFIG file < environment
// < explicit overrides, then validates everything and throws one ConfigError listing every problem.
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as v from 'valibot';
import { checkRelations, checkServiceAccess, checkKey } from './checks.ts';
import { redactUrl } from '../secrets/redact.ts';
import { nearestName } from '../errors/nearest-name.ts';
import { isPlainObject } from '../schema/plain-object.ts';
import { ConfigError } from './errors.ts';
import type { ConfigProblem } from './errors.ts';
import { FORMAT, formatSchema } from './formats.ts';
import { layerValues } from './layers.ts';
import { listSettings } from './schema.ts';
import type { Setting, WorkerConfig } from './schema.ts';

export interface LoadConfigOptions {
  /** Environment variables to read. Default: `process.env`. */
  env?: NodeJS.ProcessEnv;
  /** Highest-precedence values by dotted setting name (`{ 'budget.perMinute': 30 }`); `undefined` values are ignored. */
  overrides?: Record<string, unknown>;
  /** Directory against which DF_CONFIG, handlers.dir, state.dir, api.keyFile and the Redis TLS files are resolved. Default: `process.cwd()`. */
  cwd?: string;
  /** `'service'`: api.url and an API key are required (`start`). `'none'` (default): neither is (`demo`, `check`). */
  require?: 'service' | 'none';
}

/** The package's own defaults file, shipped next to `src/` and `dist/`. */
export const PACKAGE_DEFAULTS_FILE = fileURLToPath(new URL('../../config/default.json', import.meta.url));

const SETTINGS = new Map(listSettings().map(({ setting, entry }) => [setting, entry]));
const SCHEMAS = new Map(
  listSettings().map(({ setting, entry }) => [setting, formatSchema(entry.format, entry)]),
);
// Top-level settings first, then each level in schema order: the order problems are listed in.
const BY_DEPTH = [...SETTINGS.keys()].sort((a, b) => a.split('.').length - b.split('.').length);

/** A JSON object merged into the configuration, with where it came from for error messages. */
interface FileLayer {
  description: string;
  values: Record<string, unknown>;
}

/** Loads and validates the configuration; throws `ConfigError` listing every bad setting. */
export function loadConfig(options: LoadConfigOptions = {}): WorkerConfig {
  const env = options.env ?? process.env;
  const cwd = resolve(options.cwd ?? process.cwd());
  const overrides = options.overrides ?? {};
  const problems: ConfigProblem[] = [];

  const layers: FileLayer[] = [];
  const packageDefaults = readJsonObject(PACKAGE_DEFAULTS_FILE, 'reinstall df-worker');
  if ('problem' in packageDefaults) {
    problems.push({ setting: 'config/default.json', message: packageDefaults.problem });
  } else {
    layers.push({
      description: `the package defaults file ${PACKAGE_DEFAULTS_FILE}`,
      values: packageDefaults.values,
    });
  }
  const configFile = env.DF_CONFIG;
  if (configFile !== undefined && configFile !== '') {
    const path = resolve(cwd, configFile);
    const file = readJsonObject(path, 'point DF_CONFIG at a readable JSON file or unset it');
    if ('problem' in file) problems.push({ setting: 'DF_CONFIG', message: file.problem });
    else layers.push({ description: `the DF_CONFIG file ${path}`, values: file.values });
  }
  const layered = layerValues(
    layers.map((layer) => layer.values),
    env,
    overrides,
  );
  problems.push(...layered.problems);
  const values = layered.values as unknown as WorkerConfig;
  const invalid = validate(values, { env, overrides, layers });
  problems.push(...invalid);
  const invalidSettings = new Set(invalid.map((problem) => problem.setting));
  problems.push(...checkRelations(values, invalidSettings));

  const key =
    invalidSettings.has('api.key') || invalidSettings.has('api.keyFile') ? undefined : loadKey(values, cwd);
  if (key !== undefined) {
    if ('problem' in key) problems.push(key.problem);
    else values.api.key = key.value;
  }
  if (options.require === 'service') problems.push(...checkServiceAccess(values, invalidSettings));

  if (problems.length > 0) throw new ConfigError(problems);
  values.handlers.dir = resolve(cwd, values.handlers.dir);
  values.state.dir = resolve(cwd, values.state.dir);
  if (values.api.keyFile !== '') values.api.keyFile = resolve(cwd, values.api.keyFile);
  for (const file of ['tlsCaFile', 'tlsCertFile', 'tlsKeyFile'] as const) {
    if (values.cluster[file] !== '') values.cluster[file] = resolve(cwd, values.cluster[file]);
  }
  return values;
}

function readJsonObject(
  path: string,
  remedy: string,
): { values: Record<string, unknown> } | { problem: string } {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? 'unknown error';
    const what = code === 'ENOENT' ? 'it does not exist' : `${code}`;
    return { problem: `cannot read the configuration file ${path} (${what}); ${remedy}` };
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    // V8's message may quote the file's text, which can hold the API key: keep only the position.
    const where = /(line \d+ column \d+|position \d+)/.exec((error as Error).message)?.[1];
    return { problem: `${path} is not valid JSON${where === undefined ? '' : ` (at ${where})`}; ${remedy}` };
  }
  if (!isPlainObject(parsed)) {
    return { problem: `${path} must hold a JSON object such as {"api": {"url": "..."}}; ${remedy}` };
  }
  return { values: parsed };
}

interface Sources {
  env: NodeJS.ProcessEnv;
  overrides: Record<string, unknown>;
  layers: FileLayer[];
}

/**
 * Checks every setting against its format's schema, then names what is missing (a setting, or one of its
 * parents, given an object or a value where the other was expected) and what is not a setting at all.
 */
function validate(values: object, sources: Sources): ConfigProblem[] {
  const given = new Set(leaves(values));
  const invalid: ConfigProblem[] = [];
  const missing: ConfigProblem[] = [];
  for (const setting of BY_DEPTH) {
    if (!given.has(setting)) {
      missing.push(missingProblem(setting, values, sources));
      continue;
    }
    const value = valueAt(values, setting);
    const result = v.safeParse(SCHEMAS.get(setting)!, value, { abortEarly: true });
    if (!result.success) invalid.push(invalidProblem(setting, value, result.issues[0].message, sources));
  }
  // A setting given an object (`{"api": {"key": {"a": "x"}}}`) is reported above as having the wrong type;
  // the members of that object are not reported as unknown settings.
  const undeclared = [...given]
    .filter((name) => !name.split('.').some((_, index) => SETTINGS.has(name.split('.', index + 1).join('.'))))
    .map((name) => undeclaredProblem(name, sources));
  return [...invalid, ...missing, ...undeclared];
}

/**
 * The dotted names of the values given, as far down as objects go (an array, null or `{}` ends a name), level by
 * level: `{"log": {"level": "x"}}` gives `log.level`, `{"log": "x"}` gives `log`.
 */
function leaves(values: object): string[] {
  const names: string[] = [];
  const queue: [string, unknown][] = Object.entries(values);
  for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
    const [name, value] = next;
    const members = isPlainObject(value) ? Object.entries(value) : [];
    if (members.length === 0) names.push(name);
    else queue.push(...members.map(([key, member]): [string, unknown] => [`${name}.${key}`, member]));
  }
  return names;
}

function undeclaredProblem(setting: string, sources: Sources): ConfigProblem {
  const source = fileSource(setting, sources) ?? ' (from the command-line options)';
  const nearest = nearestName(setting, SETTINGS.keys());
  const remedy =
    nearest === undefined
      ? 'remove it or correct its spelling'
      : `did you mean '${nearest}'? Correct its spelling`;
  return { setting, message: `is not a setting df-worker knows${source}; ${remedy}` };
}

const EXPECTED_TYPE: Record<string, string> = {
  string: 'a string',
  number: 'a number',
  boolean: 'true or false',
};

function invalidProblem(setting: string, value: unknown, problem: string, sources: Sources): ConfigProblem {
  const entry = SETTINGS.get(setting)!;
  let message = problem;
  // A sensitive value is never shown; a URL may hold a password, so it is shown redacted.
  if (entry.sensitive !== true) {
    const isUrl = entry.format === FORMAT.httpUrl || entry.format === FORMAT.redisUrl;
    const shown = isUrl && typeof value === 'string' ? redactUrl(value) : value;
    message += `, got ${formatValue(shown)}`;
  }
  return { setting, env: entry.env, message: message + describeSource(setting, entry, sources) };
}

/** A setting is missing when it, or one of its parents, was given the wrong kind of value (an object, or not one). */
function missingProblem(setting: string, values: object, sources: Sources): ConfigProblem {
  const entry = SETTINGS.get(setting);
  const value = valueAt(values, setting);
  if (entry !== undefined && typeof value === 'object' && value !== null) {
    const expected = EXPECTED_TYPE[typeof entry.default] ?? 'a single value';
    return {
      setting,
      env: entry.env,
      message: `must be ${expected}, got an object${describeSource(setting, entry, sources)}`,
    };
  }
  const parent = setting.slice(0, Math.max(0, setting.lastIndexOf('.')));
  const message =
    parent === ''
      ? 'is missing; give it a value'
      : `is missing because '${parent}' was given a value that is not an object; give '${parent}' an object of settings`;
  return { setting, ...envOf(setting), message };
}

function envOf(setting: string): { env?: string } {
  const env = SETTINGS.get(setting)?.env;
  return env === undefined ? {} : { env };
}

function describeSource(setting: string, entry: Setting<unknown>, sources: Sources): string {
  if (sources.overrides[setting] !== undefined) return ' (from the command-line options)';
  if (sources.env[entry.env] !== undefined) return '';
  return fileSource(setting, sources) ?? '';
}

function fileSource(setting: string, sources: Sources): string | undefined {
  const layer = sources.layers.findLast((candidate) => valueAt(candidate.values, setting) !== undefined);
  return layer === undefined ? undefined : ` (from ${layer.description})`;
}

function valueAt(root: unknown, setting: string): unknown {
  let node = root;
  for (const name of setting.split('.')) {
    if (typeof node !== 'object' || node === null || !Object.hasOwn(node, name)) return undefined;
    node = (node as Record<string, unknown>)[name];
  }
  return node;
}

function formatValue(value: unknown): string {
  if (value === undefined) return 'nothing';
  const text = JSON.stringify(value);
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}

/** The key from api.keyFile (trimmed), or a check of api.key when it is given directly. */
function loadKey(
  values: WorkerConfig,
  cwd: string,
): { value: string } | { problem: ConfigProblem } | undefined {
  const { key, keyFile } = values.api;
  if (keyFile === '' || key !== '') {
    const problem = key === '' ? undefined : checkKey(key, 'api.key');
    return problem === undefined ? undefined : { problem };
  }
  const path = resolve(cwd, keyFile);
  let content: string;
  try {
    content = readFileSync(path, 'utf8').trim();
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? 'unknown error';
    const what = code === 'ENOENT' ? 'it does not exist' : code;
    return {
      problem: {
        setting: 'api.keyFile',
        env: 'DF_API_KEY_FILE',
        message: `cannot read the key file ${path} (${what}); check the path and the file's permissions`,
      },
    };
  }
  const problem = checkKey(content, 'api.keyFile', path);
  return problem === undefined ? { value: content } : { problem };
}
