// Checks the Helm chart: metadata, values against values.schema.json (defaults, examples, refused values), template
// references, what the real helm (helm-chart.ts) renders for standalone and clustered values, each object valid for
// the Kubernetes and CRD schemas, the dashboard's and alerts' metric names, and the example handler.
import { execFile } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Ajv } from 'ajv';
import { collectDefaultMetrics, Histogram, Registry, Summary } from 'prom-client';
import { afterAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { loadConfig } from '../../src/config/index.ts';
import { chartRules } from './alert-rules.ts';
import { configValuesSchema, VALUES_SCHEMA_FILE } from './chart-config-schema.ts';
import {
  ChartFailure,
  coalesce,
  renderChart,
  renderManifests,
  renderNotes,
  type Manifest,
  type Release,
} from './helm-chart.ts';

const repoRoot = fileURLToPath(new URL('../..', import.meta.url));
const chartDir = path.join(repoRoot, 'helm/df-worker');
const tempDirs: string[] = [];

afterAll(async () => {
  await Promise.all(tempDirs.map((dir) => rm(dir, { recursive: true, force: true })));
});

type Values = Record<string, unknown>;

function isObject(value: unknown): value is Values {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

async function readYaml(file: string): Promise<Values> {
  const parsed: unknown = parseYaml(await readFile(file, 'utf8'));
  if (!isObject(parsed)) throw new Error(`${file} does not hold a YAML mapping`);
  return parsed;
}

async function templates(): Promise<Map<string, string>> {
  const dir = path.join(chartDir, 'templates');
  const names = (await readdir(dir)).sort();
  return new Map(
    await Promise.all(
      names.map(async (name) => [name, await readFile(path.join(dir, name), 'utf8')] as const),
    ),
  );
}

/** Template actions (`{{ ... }}`) with raw-string literals emptied, since Prometheus templates hide inside them. */
function actions(template: string): string[] {
  const withoutRawStrings = template.replace(/`[^`]*`/g, '``');
  return [...withoutRawStrings.matchAll(/\{\{-?\s*([\s\S]*?)\s*-?\}\}/g)].map((match) => match[1]!);
}

/** Every metric name the worker exposes: its own (read from src/) and prom-client's default ones. */
async function exposedMetricNames(): Promise<Set<string>> {
  const srcDir = path.join(repoRoot, 'src');
  const sourceFiles = (await readdir(srcDir, { recursive: true })).filter((name) => name.endsWith('.ts'));
  const source = (
    await Promise.all(sourceFiles.map((name) => readFile(path.join(srcDir, name), 'utf8')))
  ).join('\n');
  const names = new Set<string>();
  for (const [, kind, name] of source.matchAll(
    /new (Counter|Gauge|Histogram|Summary)\(\{\s*name: '(dfworker_\w+)'/g,
  )) {
    names.add(name!);
    if (kind === 'Histogram')
      for (const suffix of ['_bucket', '_sum', '_count']) names.add(`${name}${suffix}`);
    if (kind === 'Summary') for (const suffix of ['_sum', '_count']) names.add(`${name}${suffix}`);
  }
  const prefix = /collectDefaultMetrics\(\{[^}]*prefix: '(\w+)'/.exec(source)?.[1];
  if (prefix !== undefined) {
    const registry = new Registry();
    collectDefaultMetrics({ register: registry, prefix });
    for (const metric of registry.getMetricsAsArray()) {
      names.add(metric.name);
      if (metric instanceof Histogram)
        for (const s of ['_bucket', '_sum', '_count']) names.add(`${metric.name}${s}`);
      if (metric instanceof Summary) for (const s of ['_sum', '_count']) names.add(`${metric.name}${s}`);
    }
    registry.clear();
  }
  return names;
}

function metricNamesIn(text: string): string[] {
  return [...new Set(text.match(/\bdfworker_\w+/g) ?? [])];
}

const packageJson = JSON.parse(await readFile(path.join(repoRoot, 'package.json'), 'utf8')) as {
  version: string;
};
const chart = await readYaml(path.join(chartDir, 'Chart.yaml'));
const defaults = await readYaml(path.join(chartDir, 'values.yaml'));
const valuesSchema = JSON.parse(await readFile(VALUES_SCHEMA_FILE, 'utf8')) as { properties: Values };
const validateValues = new Ajv({ allErrors: true, strict: true }).compile(valuesSchema);
const exampleFiles = (await readdir(path.join(chartDir, 'examples')))
  .filter((name) => name.endsWith('.yaml'))
  .sort();
const templateTexts = await templates();
const knownMetrics = await exposedMetricNames();

function schemaErrors(values: Values): string[] {
  if (validateValues(values)) return [];
  return (validateValues.errors ?? []).map((error) => `${error.instancePath || '/'} ${error.message ?? ''}`);
}

describe('Chart.yaml', () => {
  it('is a v2 application chart whose appVersion is the package version', () => {
    expect(chart).toMatchObject({ apiVersion: 'v2', name: 'df-worker', type: 'application' });
    expect(chart.appVersion).toBe(packageJson.version);
    expect(chart.version).toMatch(/^\d+\.\d+\.\d+(-[\w.]+)?$/);
  });
});

describe('values.yaml and values.schema.json', () => {
  it('the default values satisfy the schema', () => {
    expect(schemaErrors(defaults)).toEqual([]);
  });

  it.each(exampleFiles)('the example %s, merged over the defaults, satisfies the schema', async (name) => {
    const example = await readYaml(path.join(chartDir, 'examples', name));
    expect(schemaErrors(coalesce(defaults, example))).toEqual([]);
  });

  it('documents the set-ups helm/README.md and CLUSTERING.md refer to', () => {
    expect(exampleFiles).toEqual(
      expect.arrayContaining([
        'clustered.yaml',
        'custom-image.yaml',
        'existing-secret.yaml',
        'handlers-configmap.yaml',
        'persistence.yaml',
      ]),
    );
  });

  it('leaves the replica count to the templates, which know whether Redis is configured', () => {
    expect(schemaErrors(coalesce(defaults, { replicaCount: 3 }))).toEqual([]);
    expect(schemaErrors(coalesce(defaults, { replicaCount: -1 }))).toEqual(['/replicaCount must be >= 0']);
    expect(schemaErrors(coalesce(defaults, { podDisruptionBudget: { enabled: 'yes' } }))).not.toEqual([]);
    expect(schemaErrors(coalesce(defaults, { podDisruptionBudget: { maxUnavailable: '50%' } }))).toEqual([]);
    expect(
      schemaErrors(coalesce(defaults, { redis: { existingSecret: 'r', url: 'redis://x' } })),
    ).not.toEqual([]);
  });

  it('refuses the API key in the config ConfigMap and settings the chart sets itself', () => {
    for (const config of [
      { api: { key: 'k' } },
      { api: { keyFile: '/k' } },
      { state: { dir: '/s' } },
      { http: { port: 1 } },
      { http: { host: '127.0.0.1' } },
      { redis: { url: 'redis://:secret@redis:6379' } },
    ]) {
      expect(schemaErrors(coalesce(defaults, { config })), JSON.stringify(config)).not.toEqual([]);
    }
  });

  it('refuses unknown keys and badly typed settings in config, as the worker would', () => {
    expect(schemaErrors(coalesce(defaults, { config: { budget: { perMonht: 10 } } }))).not.toEqual([]);
    expect(schemaErrors(coalesce(defaults, { config: { concurrency: 'four' } }))).not.toEqual([]);
    expect(schemaErrors(coalesce(defaults, { config: { journal: { replay: 'skip' } } }))).not.toEqual([]);
    expect(schemaErrors(coalesce(defaults, { config: { budget: { perMonth: 1000 } } }))).toEqual([]);
  });

  it("derives the schema's config section from src/config/schema.ts", () => {
    // On failure, regenerate with `npm run docs`.
    expect(valuesSchema.properties.config).toEqual(configValuesSchema());
  });

  it.each(['values.yaml', ...exampleFiles.map((name) => `examples/${name}`)])(
    'the worker accepts the config JSON the chart writes from %s',
    async (file) => {
      const values =
        file === 'values.yaml' ? defaults : coalesce(defaults, await readYaml(path.join(chartDir, file)));
      const dir = await mkdtemp(path.join(os.tmpdir(), 'df-worker-chart-config-'));
      tempDirs.push(dir);
      const configFile = path.join(dir, 'config.json');
      await writeFile(configFile, JSON.stringify(values.config));
      // The environment the deployment template sets, plus a URL where the defaults leave it to the user.
      const env = {
        DF_CONFIG: configFile,
        DF_API_KEY: 'test-key',
        DF_STATE_DIR: dir,
        DF_HANDLERS_DIR: dir,
        DF_HTTP_PORT: '9464',
        DF_HTTP_WAKE: 'off',
        ...((values.config as { api?: { url?: string } }).api?.url
          ? {}
          : { DF_API_URL: 'https://api.example.com' }),
      };
      const config = loadConfig({ env, require: 'service', cwd: dir });
      expect(config.shutdownGraceMs).toBe((values.config as { shutdownGraceMs: number }).shutdownGraceMs);
    },
  );

  it('defaults to a hardened, non-root, read-only container with a state volume and room for graceful shutdown', () => {
    expect(defaults.securityContext).toMatchObject({
      runAsNonRoot: true,
      runAsUser: 1000,
      readOnlyRootFilesystem: true,
      allowPrivilegeEscalation: false,
      capabilities: { drop: ['ALL'] },
      seccompProfile: { type: 'RuntimeDefault' },
    });
    expect(defaults.podSecurityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 1000, fsGroup: 1000 });
    const graceMs = (defaults.config as { shutdownGraceMs: number }).shutdownGraceMs;
    expect(defaults.terminationGracePeriodSeconds).toBe(60);
    expect((defaults.terminationGracePeriodSeconds as number) * 1000).toBeGreaterThan(
      graceMs + Math.max(5000, graceMs / 2),
    );
    expect(defaults.livenessProbe).toMatchObject({ httpGet: { path: '/healthz', port: 'probes' } });
    expect(defaults.readinessProbe).toMatchObject({ httpGet: { path: '/readyz', port: 'probes' } });
  });
});

describe('templates', () => {
  it('reference only values that values.yaml defines', () => {
    const missing: string[] = [];
    for (const [name, text] of templateTexts) {
      const aliases = new Map<string, string>();
      for (const [, variable, target] of text.matchAll(/(\$\w+) := \.Values((?:\.\w+)+)\s*\}\}/g)) {
        aliases.set(variable!, target!);
      }
      const references = [...text.matchAll(/(?:\$?\.Values|(\$\w+))((?:\.\w+)+)/g)].flatMap(
        ([, variable, rest]) => {
          if (variable === undefined) return [rest!];
          const target = aliases.get(variable);
          return target === undefined ? [] : [`${target}${rest!}`];
        },
      );
      for (const reference of references) {
        let node: unknown = defaults;
        for (const key of reference.slice(1).split('.')) {
          node = isObject(node) && key in node ? node[key] : undefined;
          if (node === undefined) break;
        }
        if (node === undefined) missing.push(`${name}: .Values${reference}`);
      }
    }
    expect(missing).toEqual([]);
  });

  it('open and close their blocks in pairs and include only defined templates', () => {
    const defined = new Set<string>();
    for (const text of templateTexts.values()) {
      for (const [, name] of text.matchAll(/\{\{-?\s*define "([^"]+)"/g)) defined.add(name!);
    }
    for (const [name, text] of templateTexts) {
      let depth = 0;
      for (const action of actions(text)) {
        if (action.startsWith('/*')) continue;
        const keyword = /^(if|with|range|define|block|end)\b/.exec(action)?.[1];
        if (keyword === 'end') depth -= 1;
        else if (keyword !== undefined) depth += 1;
        expect(depth, `${name}: an {{ end }} without its block`).toBeGreaterThanOrEqual(0);
        for (const [, included] of action.matchAll(/\binclude "([^"]+)"/g)) {
          expect(defined, `${name} includes "${included}"`).toContain(included);
        }
      }
      expect(depth, `${name}: unclosed blocks`).toBe(0);
    }
  });

  it('pass the key as a file, and the probes and securityContext from values', () => {
    const deployment = templateTexts.get('deployment.yaml')!;
    expect(deployment).toContain('- name: DF_API_KEY_FILE');
    expect(deployment).not.toMatch(/name: DF_API_KEY\n/);
    expect(deployment).toContain('checksum/config:');
    expect(deployment).toContain('checksum/secret:');
    for (const key of [
      'livenessProbe',
      'readinessProbe',
      'startupProbe',
      'securityContext',
      'podSecurityContext',
    ]) {
      expect(deployment).toContain(`.Values.${key}`);
    }
  });

  it('load the Grafana dashboard file with the sidecar label', () => {
    const dashboard = templateTexts.get('dashboard-configmap.yaml')!;
    expect(dashboard).toContain('.Files.Get "dashboards/df-worker.json"');
    const grafana = defaults.grafana as { dashboard: { enabled: boolean; labels: Record<string, string> } };
    expect(grafana.dashboard).toMatchObject({ enabled: false, labels: { grafana_dashboard: '1' } });
  });
});

/** The least a user must set: the service URL and the key. */
const REQUIRED = {
  config: { api: { url: 'https://api.example.com' } },
  apiKey: { existingSecret: 'df-worker-key' },
};
const CLUSTERED = {
  ...REQUIRED,
  replicaCount: 3,
  redis: { existingSecret: 'df-worker-redis', existingSecretKey: 'redis-url' },
};

interface Container {
  env: { name: string; value?: string; valueFrom?: Values }[];
  volumeMounts: { name: string; mountPath: string }[];
}

interface Deployment extends Manifest {
  spec: {
    replicas: number;
    strategy: { type: string; rollingUpdate?: Values };
    template: { spec: { containers: Container[]; volumes: ({ name: string } & Values)[] } };
  };
}

function find<T extends Manifest>(manifests: Manifest[], kind: string): T | undefined {
  return manifests.find((manifest) => manifest.kind === kind) as T | undefined;
}

function deploymentOf(values: Values): Deployment {
  return find<Deployment>(renderManifests(values), 'Deployment')!;
}

function failureOf(values: Values, release: Release = {}): string {
  try {
    renderChart(values, release);
  } catch (error) {
    if (error instanceof ChartFailure) return error.message;
    throw error;
  }
  throw new Error('the chart rendered without failing');
}

describe('the chart rendered', () => {
  it('standalone by default: one replica with Recreate, the state volume, no Redis and no PodDisruptionBudget', () => {
    const manifests = renderManifests(REQUIRED);
    expect(manifests.map((manifest) => manifest.kind).sort()).toEqual(['ConfigMap', 'Deployment', 'Service']);
    const deployment = find<Deployment>(manifests, 'Deployment')!;
    expect(deployment.spec.replicas).toBe(1);
    expect(deployment.spec.strategy).toEqual({ type: 'Recreate' });
    const [container] = deployment.spec.template.spec.containers;
    const env = container!.env.map((variable) => variable.name);
    expect(env).toEqual([
      'DF_CONFIG',
      'DF_API_KEY_FILE',
      'DF_STATE_DIR',
      'DF_HANDLERS_DIR',
      'DF_HTTP_PORT',
      'DF_HTTP_PROBE_PORT',
      'DF_HTTP_HOST',
      'DF_HTTP_WAKE',
    ]);
    expect(container!.env).toContainEqual({ name: 'DF_HTTP_HOST', value: '0.0.0.0' });
    expect(container!.volumeMounts).toContainEqual({ name: 'state', mountPath: '/var/lib/df-worker' });
    expect(deployment.spec.template.spec.volumes).toContainEqual({ name: 'state', emptyDir: {} });
    expect(renderNotes(REQUIRED)).toContain('WARNING: persistence is disabled.');
  });

  it("http.host podIP binds the HTTP server to the pod's own IP, from the downward API", () => {
    const [container] = deploymentOf({ ...REQUIRED, http: { host: 'podIP' } }).spec.template.spec.containers;
    expect(container!.env).toContainEqual({
      name: 'DF_HTTP_HOST',
      valueFrom: { fieldRef: { fieldPath: 'status.podIP' } },
    });
  });

  it('tracing.endpoint sets the OpenTelemetry SDK variables; without it none is set', () => {
    const none = deploymentOf(REQUIRED).spec.template.spec.containers[0]!.env;
    expect(none.filter((variable) => variable.name.startsWith('OTEL_'))).toEqual([]);
    const [container] = deploymentOf({
      ...REQUIRED,
      tracing: {
        endpoint: 'http://otel-collector.observability:4318',
        serviceName: 'df-worker-prices',
        sampler: 'parentbased_traceidratio',
        samplerArg: '0.25',
        resourceAttributes: 'deployment.environment.name=production',
      },
    }).spec.template.spec.containers;
    expect(container!.env.filter((variable) => variable.name.startsWith('OTEL_'))).toEqual([
      { name: 'OTEL_EXPORTER_OTLP_ENDPOINT', value: 'http://otel-collector.observability:4318' },
      { name: 'OTEL_SERVICE_NAME', value: 'df-worker-prices' },
      { name: 'OTEL_TRACES_SAMPLER', value: 'parentbased_traceidratio' },
      { name: 'OTEL_TRACES_SAMPLER_ARG', value: '0.25' },
      { name: 'OTEL_RESOURCE_ATTRIBUTES', value: 'deployment.environment.name=production' },
    ]);
    expect(schemaErrors({ ...REQUIRED, tracing: { endpoint: 'otel-collector:4318' } })).not.toEqual([]);
  });

  it('standalone with persistence: the state volume is the claim the chart creates', () => {
    const manifests = renderManifests({ ...REQUIRED, persistence: { enabled: true } });
    expect(find(manifests, 'PersistentVolumeClaim')?.metadata.name).toBe('df-worker-state');
    expect(find<Deployment>(manifests, 'Deployment')!.spec.template.spec.volumes).toContainEqual({
      name: 'state',
      persistentVolumeClaim: { claimName: 'df-worker-state' },
    });
    expect(find<Deployment>(manifests, 'Deployment')!.spec.strategy).toEqual({ type: 'Recreate' });
  });

  it('refuses replicaCount 2 without Redis, naming the value to set', () => {
    const message = failureOf({ ...REQUIRED, replicaCount: 2 });
    expect(message).toMatch(/^replicaCount is 2, but redis\.existingSecret is empty: /);
    expect(message).toContain('would each spend the key');
    expect(message).toContain('Set redis.existingSecret to the name of a Secret holding the Redis URL');
    expect(message).toContain('or set replicaCount to 1 (or 0)');
    expect(() => renderChart({ ...REQUIRED, replicaCount: 0 })).not.toThrow();
  });

  it('clustered: RollingUpdate, DF_REDIS_URL from the Secret, DF_REPLICA_ID the pod name, and a PodDisruptionBudget', () => {
    const manifests = renderManifests(CLUSTERED);
    const deployment = find<Deployment>(manifests, 'Deployment')!;
    expect(deployment.spec.replicas).toBe(3);
    expect(deployment.spec.strategy).toEqual({
      type: 'RollingUpdate',
      rollingUpdate: { maxSurge: 1, maxUnavailable: 0 },
    });
    const [container] = deployment.spec.template.spec.containers;
    expect(container!.env).toContainEqual({
      name: 'DF_REDIS_URL',
      valueFrom: { secretKeyRef: { name: 'df-worker-redis', key: 'redis-url' } },
    });
    expect(container!.env).toContainEqual({
      name: 'DF_REPLICA_ID',
      valueFrom: { fieldRef: { fieldPath: 'metadata.name' } },
    });
    // The URL may hold a password: it reaches the pod from the Secret only, never through the ConfigMap.
    expect(JSON.stringify(find(manifests, 'ConfigMap'))).not.toMatch(/redis/i);
    expect(deployment.spec.template.spec.volumes).toContainEqual({ name: 'state', emptyDir: {} });
    expect(find(manifests, 'PersistentVolumeClaim')).toBeUndefined();
    const budget = find<Manifest & { spec: Values }>(manifests, 'PodDisruptionBudget')!;
    expect(budget.apiVersion).toBe('policy/v1');
    expect(budget.spec).toEqual({
      maxUnavailable: 1,
      selector: {
        matchLabels: { 'app.kubernetes.io/name': 'df-worker', 'app.kubernetes.io/instance': 'df-worker' },
      },
    });
    const notes = renderNotes(CLUSTERED);
    expect(notes).toContain('Clustered mode: 3 replicas share');
    expect(notes).not.toContain('WARNING: persistence');
  });

  it('clustered with Redis Sentinel and TLS: the sentinels, master and password, and the TLS files from their Secret', () => {
    const deployment = deploymentOf({
      ...CLUSTERED,
      redis: {
        ...CLUSTERED.redis,
        sentinels: ['redis-sentinel-0.redis:26379', 'redis-sentinel-1.redis:26379'],
        sentinelMaster: 'orders',
        sentinelPasswordKey: 'sentinel-password',
        tls: { secretName: 'redis-tls', caKey: 'ca.crt', certKey: 'tls.crt', keyKey: 'tls.key' },
      },
    });
    const { env, volumeMounts } = deployment.spec.template.spec.containers[0]!;
    expect(env).toEqual(
      expect.arrayContaining([
        { name: 'DF_REDIS_SENTINELS', value: 'redis-sentinel-0.redis:26379,redis-sentinel-1.redis:26379' },
        { name: 'DF_REDIS_SENTINEL_MASTER', value: 'orders' },
        {
          name: 'DF_REDIS_SENTINEL_PASSWORD',
          valueFrom: { secretKeyRef: { name: 'df-worker-redis', key: 'sentinel-password' } },
        },
        { name: 'DF_REDIS_TLS_CA_FILE', value: '/etc/df-worker/redis-tls/ca.crt' },
        { name: 'DF_REDIS_TLS_CERT_FILE', value: '/etc/df-worker/redis-tls/tls.crt' },
        { name: 'DF_REDIS_TLS_KEY_FILE', value: '/etc/df-worker/redis-tls/tls.key' },
      ]),
    );
    expect(volumeMounts).toContainEqual({
      name: 'redis-tls',
      mountPath: '/etc/df-worker/redis-tls',
      readOnly: true,
    });
    const volume = deployment.spec.template.spec.volumes.find((v) => v.name === 'redis-tls');
    expect(volume?.secret).toMatchObject({
      secretName: 'redis-tls',
      items: [
        { key: 'ca.crt', path: 'ca.crt' },
        { key: 'tls.crt', path: 'tls.crt' },
        { key: 'tls.key', path: 'tls.key' },
      ],
    });
    // Without them, none of it.
    const plain = JSON.stringify(deploymentOf(CLUSTERED));
    expect(plain).not.toMatch(/DF_REDIS_SENTINEL|DF_REDIS_TLS|redis-tls/);
    expect(
      failureOf({
        ...CLUSTERED,
        redis: { ...CLUSTERED.redis, tls: { secretName: 's', certKey: 'tls.crt' } },
      }),
    ).toMatch(/^redis\.tls\.certKey is set but redis\.tls\.keyKey is empty/);
  });

  it('clustered with one replica still rolls (no downtime on upgrades), without a PodDisruptionBudget', () => {
    const manifests = renderManifests({ ...CLUSTERED, replicaCount: 1 });
    expect(find<Deployment>(manifests, 'Deployment')!.spec.strategy.type).toBe('RollingUpdate');
    expect(find(manifests, 'PodDisruptionBudget')).toBeUndefined();
  });

  it('the PodDisruptionBudget can be disabled, set by minAvailable, or forced on for one replica, which it keeps', () => {
    expect(
      find(renderManifests({ ...CLUSTERED, podDisruptionBudget: { enabled: false } }), 'PodDisruptionBudget'),
    ).toBeUndefined();
    const byMin = find<Manifest & { spec: Values }>(
      renderManifests({ ...CLUSTERED, podDisruptionBudget: { minAvailable: 2 } }),
      'PodDisruptionBudget',
    )!;
    expect(byMin.spec.minAvailable).toBe(2);
    expect(byMin.spec).not.toHaveProperty('maxUnavailable');
    // One replica: the PDB keeps that pod (minAvailable 1), as the chart's PDB always did.
    const single = find<Manifest & { spec: Values }>(
      renderManifests({ ...REQUIRED, podDisruptionBudget: { enabled: true } }),
      'PodDisruptionBudget',
    )!;
    expect(single.spec.minAvailable).toBe(1);
    expect(single.spec).not.toHaveProperty('maxUnavailable');
    // helm refuses it against values.schema.json first; the template's own check stays for a skipped schema.
    expect(failureOf({ ...REQUIRED, podDisruptionBudget: { enabled: 'sometimes' } })).toContain(
      "at '/podDisruptionBudget/enabled': 'anyOf' failed",
    );
    expect(
      failureOf(
        { ...REQUIRED, podDisruptionBudget: { enabled: 'sometimes' } },
        { skipSchemaValidation: true },
      ),
    ).toContain('podDisruptionBudget.enabled is sometimes');
  });

  it('refuses clustered values that cannot work: persistence, or no entry named in the Redis Secret', () => {
    expect(failureOf({ ...CLUSTERED, persistence: { enabled: true } })).toMatch(
      /^persistence\.enabled is true, but redis\.existingSecret is set: .* Set persistence\.enabled to false\.$/,
    );
    expect(
      failureOf({ ...CLUSTERED, redis: { existingSecret: 'df-worker-redis', existingSecretKey: '' } }),
    ).toMatch(/^redis\.existingSecret is set but redis\.existingSecretKey is empty/);
  });

  it('autoscaling: an HPA or a ScaledObject on the saturation query, only in clustered mode, owning the replica count', () => {
    expect(renderManifests(CLUSTERED).map((m) => m.kind)).not.toEqual(
      expect.arrayContaining(['HorizontalPodAutoscaler']),
    );
    const withHpa = renderManifests({
      ...CLUSTERED,
      autoscaling: { hpa: { enabled: true }, maxReplicas: 6 },
    });
    const hpa = find<Manifest & { spec: Values }>(withHpa, 'HorizontalPodAutoscaler')!;
    expect(hpa.apiVersion).toBe('autoscaling/v2');
    expect(hpa.spec).toMatchObject({
      scaleTargetRef: { apiVersion: 'apps/v1', kind: 'Deployment', name: 'df-worker' },
      minReplicas: 1,
      maxReplicas: 6,
      metrics: [
        {
          type: 'External',
          external: {
            metric: {
              name: 'dfworker_cluster_saturation',
              selector: { matchLabels: { service: 'df-worker' } },
            },
            target: { type: 'Value', value: '0.8' },
          },
        },
      ],
    });
    // The autoscaler owns the count: an upgrade must not reset it to replicaCount.
    expect(find<Deployment>(withHpa, 'Deployment')!.spec).not.toHaveProperty('replicas');
    // It may run up to maxReplicas: drains take one pod at a time, even from replicaCount 1.
    const scaledFromOne = renderManifests({
      ...CLUSTERED,
      replicaCount: 1,
      autoscaling: { hpa: { enabled: true } },
    });
    expect(find<Manifest & { spec: Values }>(scaledFromOne, 'PodDisruptionBudget')!.spec).toMatchObject({
      maxUnavailable: 1,
    });

    const withKeda = renderManifests(
      { ...CLUSTERED, autoscaling: { keda: { enabled: true, authenticationRef: 'prom-auth' } } },
      { namespace: 'team-a' },
    );
    const scaled = find<Manifest & { spec: Values }>(withKeda, 'ScaledObject')!;
    expect(scaled.apiVersion).toBe('keda.sh/v1alpha1');
    expect(scaled.spec).toMatchObject({ minReplicaCount: 1, maxReplicaCount: 4 });
    expect((scaled.spec as { triggers: unknown[] }).triggers).toEqual([
      {
        type: 'prometheus',
        metricType: 'Value',
        metadata: {
          serverAddress: 'http://prometheus-operated.monitoring.svc:9090',
          query: 'max(dfworker_cluster_saturation{namespace="team-a", service="df-worker"})',
          threshold: '0.8',
        },
        authenticationRef: { name: 'prom-auth' },
      },
    ]);
    expect(find(withKeda, 'HorizontalPodAutoscaler')).toBeUndefined();
  });

  it('refuses an autoscaler in standalone mode, both at once, or a minimum above the maximum', () => {
    for (const name of ['hpa', 'keda']) {
      expect(failureOf({ ...REQUIRED, autoscaling: { [name]: { enabled: true } } })).toMatch(
        new RegExp(
          `^autoscaling\\.${name}\\.enabled is true, but redis\\.existingSecret is empty: .* or set autoscaling\\.${name}\\.enabled to false\\.$`,
        ),
      );
    }
    expect(
      failureOf({ ...CLUSTERED, autoscaling: { hpa: { enabled: true }, keda: { enabled: true } } }),
    ).toMatch(/^autoscaling\.hpa\.enabled and autoscaling\.keda\.enabled are both true: .* Keep one\.$/);
    expect(
      failureOf({ ...CLUSTERED, autoscaling: { keda: { enabled: true }, minReplicas: 5, maxReplicas: 2 } }),
    ).toBe(
      'autoscaling.minReplicas (5) is above autoscaling.maxReplicas (2): lower the first or raise the second.',
    );
    // Scaling to zero would stop the polls that bring the work that scales it up: the schema refuses it.
    expect(schemaErrors(coalesce(defaults, { autoscaling: { minReplicas: 0 } }))).toEqual([
      '/autoscaling/minReplicas must be >= 1',
    ]);
  });

  it('the saturation query uses a metric the clustered daemon exposes', () => {
    const query = (defaults.autoscaling as { query: string }).query;
    expect(metricNamesIn(query)).toEqual(['dfworker_cluster_saturation']);
    expect(knownMetrics).toContain('dfworker_cluster_saturation');
  });

  it.each(exampleFiles)(
    'the example %s renders, and only the clustered one has several replicas',
    async (name) => {
      const example = await readYaml(path.join(chartDir, 'examples', name));
      const deployment = deploymentOf(example);
      const clustered = name === 'clustered.yaml';
      expect(deployment.spec.replicas).toBe(clustered ? 3 : 1);
      expect(deployment.spec.strategy.type).toBe(clustered ? 'RollingUpdate' : 'Recreate');
    },
  );

  it('renders the same alert rules as alert-rules.ts, which writes the plain rules file', async () => {
    const manifests = renderManifests(
      { ...REQUIRED, prometheusRule: { enabled: true } },
      { namespace: 'team-a' },
    );
    const rule = find<Manifest & { spec: unknown }>(manifests, 'PrometheusRule')!;
    expect(rule.spec).toEqual(await chartRules('team-a', 'df-worker'));
  });
});

describe('helm/manifests/tasks-sync-job.yaml', () => {
  it("runs `tasks sync` with the deployment's settings, key file, state volume and security context", async () => {
    const job = await readYaml(path.join(repoRoot, 'helm/manifests/tasks-sync-job.yaml'));
    const pod = (job.spec as { template: { spec: Values } }).template.spec;
    const [container] = pod.containers as {
      args: string[];
      env: { name: string; value: string }[];
      volumeMounts: { name: string; mountPath: string }[];
      securityContext: Values;
    }[];
    expect(container!.args).toEqual(['tasks', 'sync']);
    const deployment = templateTexts.get('deployment.yaml')!;
    for (const { name, value } of container!.env) {
      expect(deployment, name).toContain(`- name: ${name}\n              value: ${value}\n`);
    }
    for (const { name, mountPath } of container!.volumeMounts) {
      expect(deployment, name).toContain(`- name: ${name}\n              mountPath: ${mountPath}\n`);
    }
    expect(pod.securityContext).toMatchObject({ runAsUser: 1000, fsGroup: 1000, runAsNonRoot: true });
    expect(container!.securityContext).toMatchObject({ readOnlyRootFilesystem: true });
    expect(pod.volumes).toContainEqual({
      name: 'state',
      persistentVolumeClaim: { claimName: 'df-worker-state' },
    });
  });
});

describe('Grafana dashboard', () => {
  const dashboardPromise = readFile(path.join(chartDir, 'dashboards/df-worker.json'), 'utf8');

  it('uses only metric names the worker exposes', async () => {
    const text = await dashboardPromise;
    const names = metricNamesIn(text);
    expect(names.length).toBeGreaterThan(10);
    expect(names.filter((name) => !knownMetrics.has(name))).toEqual([]);
  });

  it('has a panel for each concern of the brief, each querying Prometheus through the datasource variable', async () => {
    const dashboard = JSON.parse(await dashboardPromise) as {
      uid: string;
      panels: Array<{
        id: number;
        type: string;
        title: string;
        targets?: Array<{ expr: string; datasource: unknown }>;
      }>;
    };
    expect(dashboard.uid).toBe('df-worker');
    const panels = dashboard.panels.filter((panel) => panel.type !== 'row');
    expect(new Set(dashboard.panels.map((panel) => panel.id)).size).toBe(dashboard.panels.length);
    const expressions = panels.flatMap((panel) => panel.targets ?? []);
    for (const target of expressions)
      expect(target.datasource).toEqual({ type: 'prometheus', uid: '${datasource}' });
    const all = expressions.map((target) => target.expr).join('\n');
    for (const needed of [
      'dfworker_service_requests_total',
      'dfworker_service_rate_limited_total',
      'dfworker_budget_used_requests',
      'dfworker_budget_remaining_requests',
      'dfworker_budget_ahead_of_pace',
      'dfworker_polls_total',
      'dfworker_pickup_latency_seconds_bucket',
      'dfworker_handler_duration_seconds_bucket',
      'dfworker_executions_total',
      'dfworker_executions_in_flight',
      'dfworker_journal_pending',
      'dfworker_journal_dead_lettered',
      'dfworker_ready',
      'dfworker_tasks_served',
      'dfworker_handler_task_missing',
      'dfworker_budget_month_end_timestamp_seconds',
      'dfworker_cluster_coordinator',
      'dfworker_cluster_queue_jobs',
      'dfworker_cluster_replicas',
      'dfworker_cluster_saturation',
      'dfworker_cluster_handler_slots',
    ]) {
      expect(all, needed).toContain(needed);
    }
    // Which replica coordinates, one line per replica; queue depths by state.
    expect(all).toContain('max by (replica) (dfworker_cluster_coordinator{');
    expect(all).toContain('max by (state) (dfworker_cluster_queue_jobs{');
    expect(all).toContain(
      'histogram_quantile(0.5, sum by (le, task) (rate(dfworker_pickup_latency_seconds_bucket',
    );
    expect(all).toContain(
      'histogram_quantile(0.95, sum by (le, task) (rate(dfworker_pickup_latency_seconds_bucket',
    );
  });
});

describe('PrometheusRule', () => {
  const rules = templateTexts.get('prometheusrule.yaml')!;

  it('uses only metric names the worker exposes', () => {
    const names = metricNamesIn(rules);
    expect(names.filter((name) => !knownMetrics.has(name))).toEqual([]);
  });

  it('alerts on a nearly spent month or one projected to run out, 429s, dead letters, a lasting not-ready, a growing or stuck journal, a lost poll answer, dying handler workers and handlers without a task', () => {
    for (const alert of [
      'DfWorkerBudgetNearlySpent',
      'DfWorkerBudgetProjectedToRunOut',
      'DfWorkerJournalStuck',
      'DfWorkerNoTaskServed',
      'DfWorkerHandlerWithoutTask',
      'DfWorkerRateLimited',
      'DfWorkerDeadLetters',
      'DfWorkerReportsRefused',
      'DfWorkerNotReady',
      'DfWorkerJournalPendingGrowing',
      'DfWorkerPollAnswerLost',
      'DfWorkerHandlerWorkersDying',
    ]) {
      expect(rules).toContain(`- alert: ${alert}\n`);
    }
    expect(rules).toMatch(
      /dfworker_budget_remaining_requests\{window="month"[^\n]*\n\s*\/ dfworker_budget_limit_requests\{window="month"/,
    );
    expect(rules).toMatch(/and ignoring \(window\)\s*\n\s*dfworker_budget_ahead_of_pace\{[^\n]*\} == 1/);
    expect(rules).toMatch(/increase\(dfworker_service_rate_limited_total\{[^\n]*\}\[15m\]\) > 0/);
    expect(rules).toMatch(/dfworker_journal_dead_lettered\{[^\n]*\} > 0/);
    expect(rules).toMatch(/increase\(dfworker_reports_refused_total\{[^\n]*\}\[15m\]\) > 0/);
    expect(rules).toMatch(/dfworker_ready\{[^\n]*\} == 0\n\s*for: \{\{ \$rules\.notReadyFor \}\}/);
    expect((defaults.prometheusRule as Values).notReadyFor).toBe('10m');
    expect(rules).toMatch(/delta\(dfworker_journal_pending\{[^\n]*\}\[30m\]\) > 0/);
  });

  it('alerts when no replica of a clustered deployment holds the coordinator lease, or several do for long', () => {
    expect(rules).toContain('- alert: DfWorkerNoCoordinator\n');
    expect(rules).toContain('- alert: DfWorkerSplitCoordinator\n');
    expect(rules).toMatch(
      /increase\(dfworker_redis_errors_total\{[^\n]*, kind="oom" \}\[5m\]\) > 0\n\s*for: 1m/,
    );
    // A sum over the deployment's replicas: empty, so silent, where no replica exposes the metric (standalone).
    expect(rules).toMatch(
      /sum by \(namespace, service, job\) \(dfworker_cluster_coordinator\{[^\n]*\}\) == 0\n\s*for: \{\{ \$rules\.noCoordinatorFor \}\}/,
    );
    expect(rules).toMatch(
      /sum by \(namespace, service, job\) \(dfworker_cluster_coordinator\{[^\n]*\}\) > 1\n\s*for: 5m/,
    );
    expect((defaults.prometheusRule as Values).noCoordinatorFor).toBe('5m');
  });
});

describe('handlers from a ConfigMap', () => {
  it('the example handler module loads with the worker loader under Node', async () => {
    const example = await readYaml(path.join(chartDir, 'examples/handlers-configmap.yaml'));
    const files = (example.handlers as { configMap: { files: Record<string, string> } }).configMap.files;
    const dir = await mkdtemp(path.join(os.tmpdir(), 'df-worker-chart-handlers-'));
    tempDirs.push(dir);
    for (const [name, source] of Object.entries(files)) await writeFile(path.join(dir, name), source);
    const harness = fileURLToPath(new URL('./fixtures/load-handlers.ts', import.meta.url));
    const { stdout } = await promisify(execFile)(process.execPath, [harness, dir], { cwd: repoRoot });
    expect(JSON.parse(stdout)).toEqual({ keys: ['uppercase'], errors: [] });
  });
});
