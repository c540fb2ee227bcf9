// Derives the `config` section of the chart's values.schema.json from the configuration schema (src/config/schema.ts), so the
// chart refuses the same unknown keys and bad values the worker would. Run this file to rewrite that section.
import { readFile, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { listSettings } from '../../src/config/schema.ts';
import { FORMAT } from '../../src/config/formats.ts';

export const VALUES_SCHEMA_FILE = fileURLToPath(
  new URL('../../helm/df-worker/values.schema.json', import.meta.url),
);

/**
 * Settings the chart sets through the environment (which wins over DF_CONFIG), so they are refused in `config`:
 * the key must stay out of a ConfigMap, and the rest must match the chart's mounts and ports.
 */
export const CHART_SET_SETTINGS: ReadonlySet<string> = new Set([
  'api.key',
  'api.keyFile',
  'handlers.dir',
  'state.dir',
  'http.port',
  'http.probePort',
  'http.host',
  'http.wake',
  'http.wakeToken',
]);

/**
 * Environment variables the chart sets in clustered mode, refused in `config` whatever their setting is named: the
 * Redis URL and the sentinels' password come from a Secret, the replica id is the pod's name, and the sentinels
 * and TLS files come from the chart's `redis` values (the files from the Secret it mounts).
 */
export const CHART_SET_ENV: ReadonlySet<string> = new Set([
  'DF_REDIS_URL',
  'DF_REPLICA_ID',
  'DF_REDIS_SENTINELS',
  'DF_REDIS_SENTINEL_MASTER',
  'DF_REDIS_SENTINEL_PASSWORD',
  'DF_REDIS_TLS_CA_FILE',
  'DF_REDIS_TLS_CERT_FILE',
  'DF_REDIS_TLS_KEY_FILE',
]);

export interface JsonSchemaNode {
  type?: string;
  description?: string;
  properties?: Record<string, JsonSchemaNode>;
  additionalProperties?: boolean;
  minimum?: number;
  maximum?: number;
  minLength?: number;
  pattern?: string;
  enum?: readonly string[];
  [keyword: string]: unknown;
}

interface SettingFields {
  env: string;
  format: string;
  doc: string;
  min?: number;
  max?: number;
  values?: readonly string[];
  nonEmpty?: boolean;
}

function leafSchema(entry: SettingFields): JsonSchemaNode {
  const bounds = {
    ...(entry.min === undefined ? {} : { minimum: entry.min }),
    ...(entry.max === undefined ? {} : { maximum: entry.max }),
  };
  const description = entry.doc;
  switch (entry.format) {
    case FORMAT.integer:
      return { type: 'integer', ...bounds, description };
    case FORMAT.number:
      return { type: 'number', ...bounds, description };
    case FORMAT.boolean:
      return { type: 'boolean', description };
    case FORMAT.booleanOrAuto:
      return { anyOf: [{ type: 'boolean' }, { type: 'string', enum: ['auto'] }], description };
    case FORMAT.oneOf:
      return { type: 'string', enum: entry.values ?? [], description };
    case FORMAT.httpUrl:
      return { type: 'string', pattern: '^(https?://.+)?$', description };
    case FORMAT.hostPortList:
      return { type: 'string', description };
    case FORMAT.timeZone:
      return { type: 'string', minLength: 1, description };
    case FORMAT.string:
      return entry.nonEmpty === true
        ? { type: 'string', minLength: 1, description }
        : { type: 'string', description };
    default:
      throw new Error(
        `setting format "${entry.format}" has no JSON Schema mapping; add one to test/deploy/chart-config-schema.ts`,
      );
  }
}

function objectNode(description?: string): JsonSchemaNode {
  return {
    type: 'object',
    ...(description === undefined ? {} : { description }),
    additionalProperties: false,
    properties: {},
  };
}

/** The schema of the chart's `config` value: every worker setting but those the chart sets itself. */
export function configValuesSchema(): JsonSchemaNode {
  const root = objectNode(
    'The worker configuration written to DF_CONFIG; keys as in src/config/schema.ts, less those the chart sets.',
  );
  for (const { setting, entry } of listSettings()) {
    if (CHART_SET_SETTINGS.has(setting) || CHART_SET_ENV.has(entry.env)) continue;
    const path = setting.split('.');
    const name = path.pop()!;
    let node = root;
    for (const part of path) {
      node.properties![part] ??= objectNode();
      node = node.properties![part];
    }
    node.properties![name] = leafSchema(entry);
  }
  return root;
}

async function rewriteValuesSchema(): Promise<void> {
  const prettier = await import('prettier');
  const schema = JSON.parse(await readFile(VALUES_SCHEMA_FILE, 'utf8')) as {
    properties: Record<string, unknown>;
  };
  schema.properties.config = configValuesSchema();
  const options = await prettier.resolveConfig(VALUES_SCHEMA_FILE);
  const text = await prettier.format(JSON.stringify(schema), { ...options, filepath: VALUES_SCHEMA_FILE });
  await writeFile(VALUES_SCHEMA_FILE, text);
  console.log(`rewrote the config section of ${VALUES_SCHEMA_FILE}`);
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  await rewriteValuesSchema();
}
