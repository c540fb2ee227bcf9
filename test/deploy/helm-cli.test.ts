// The chart through the real helm 4 (.ci/install-helm): `helm lint --strict`, `helm template` of the defaults and
// of every example values file, `helm package`, and every object rendered valid for the Kubernetes schemas and
// the prometheus-operator and KEDA CRDs.
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  CHART_DIR,
  HELM_VERSION,
  helm,
  parseManifests,
  renderManifests,
  schemaViolations,
  type Manifest,
} from './helm-chart.ts';

const tempDirs: string[] = [];
afterAll(async () => {
  await Promise.all(tempDirs.map((dir) => rm(dir, { recursive: true, force: true })));
});

const REQUIRED = ['--set', 'config.api.url=https://api.example.com', '--set', 'apiKey.existingSecret=key'];
const exampleFiles = (await readdir(path.join(CHART_DIR, 'examples')))
  .filter((name) => name.endsWith('.yaml'))
  .sort();

interface Container {
  ports: { name: string; containerPort: number }[];
  env: { name: string; value?: string }[];
  livenessProbe: { httpGet: { port: unknown } };
  readinessProbe: { httpGet: { port: unknown } };
  startupProbe: { httpGet: { port: unknown } };
}

/** `helm template` with these arguments: the objects, or helm's error as the failure. */
function template(args: string[], chart = CHART_DIR): Manifest[] {
  const result = helm(['template', 'df-worker', chart, ...args]);
  expect(result.stderr, `helm template ${args.join(' ')}`).toBe('');
  expect(result.code).toBe(0);
  return parseManifests(result.stdout);
}

/** What the schemas refuse in `manifests`, one line each ('' when all are valid), so a failure quotes it whole. */
async function violations(manifests: Manifest[]): Promise<string> {
  return (await Promise.all(manifests.map((manifest) => schemaViolations(manifest)))).flat().join('\n');
}

describe('the real helm', () => {
  it(`is helm ${HELM_VERSION}`, () => {
    const result = helm(['version', '--template', '{{ .Version }}']);
    expect(result.stdout).toBe(`v${HELM_VERSION}`);
  });

  it('helm lint --strict passes with the least a user sets, and refuses the defaults alone', () => {
    const lint = helm(['lint', '--strict', CHART_DIR, ...REQUIRED]);
    expect(lint.stdout + lint.stderr).toContain('1 chart(s) linted, 0 chart(s) failed');
    expect(lint.code).toBe(0);
    // The defaults lack the service URL and the key: the template says which value to set.
    const bare = helm(['template', 'df-worker', CHART_DIR]);
    expect(bare.code).not.toBe(0);
    expect(bare.stderr).toContain('No API key: set apiKey.existingSecret');
  });

  it('helm template of the defaults (with the URL and key) renders objects valid for their schemas', async () => {
    const manifests = template(REQUIRED);
    expect(manifests.map((m) => m.kind).sort()).toEqual(['ConfigMap', 'Deployment', 'Service']);
    expect(await violations(manifests)).toBe('');
  });

  it("sends the kubelet's probes to the probe port, which the Service leaves out", () => {
    for (const args of [REQUIRED, [...REQUIRED, '--set', 'http.probePort=19000']]) {
      const manifests = template(args);
      const container = (
        manifests.find((m) => m.kind === 'Deployment')!.spec as {
          template: { spec: { containers: Container[] } };
        }
      ).template.spec.containers[0]!;
      const port = container.ports.find((p) => p.name === 'probes')!;
      const env = container.env.find((e) => e.name === 'DF_HTTP_PROBE_PORT');
      expect(env?.value).toBe(String(port.containerPort));
      expect(container.ports.find((p) => p.name === 'http')!.containerPort).not.toBe(port.containerPort);
      for (const probe of ['livenessProbe', 'readinessProbe', 'startupProbe'] as const) {
        expect(container[probe].httpGet.port, probe).toBe('probes');
      }
      const service = manifests.find((m) => m.kind === 'Service')!.spec as {
        ports: { targetPort: unknown }[];
      };
      expect(service.ports.map((p) => p.targetPort)).toEqual(['http']);
    }
  });

  it.each(exampleFiles)(
    'helm template of examples/%s renders objects valid for their schemas',
    async (name) => {
      const manifests = template([`--values=${path.join(CHART_DIR, 'examples', name)}`]);
      expect(manifests.length).toBeGreaterThanOrEqual(3);
      expect(await violations(manifests)).toBe('');
    },
  );

  it('every optional object is valid too: PVC, PDB, ServiceMonitor, PrometheusRule, dashboard, HPA, ScaledObject', async () => {
    const clustered = {
      config: { api: { url: 'https://api.example.com' } },
      apiKey: { value: 'a-key' },
      replicaCount: 2,
      redis: { existingSecret: 'redis' },
      serviceMonitor: { enabled: true },
      prometheusRule: { enabled: true },
      grafana: { dashboard: { enabled: true } },
    };
    const kinds = new Set<string>();
    for (const values of [
      { ...clustered, autoscaling: { hpa: { enabled: true } } },
      { ...clustered, autoscaling: { keda: { enabled: true } } },
      { ...clustered, replicaCount: 1, redis: { existingSecret: '' }, persistence: { enabled: true } },
    ]) {
      const manifests = renderManifests(values);
      for (const manifest of manifests) kinds.add(manifest.kind);
      expect(await violations(manifests), JSON.stringify(values)).toBe('');
    }
    expect([...kinds].sort()).toEqual([
      'ConfigMap',
      'Deployment',
      'HorizontalPodAutoscaler',
      'PersistentVolumeClaim',
      'PodDisruptionBudget',
      'PrometheusRule',
      'ScaledObject',
      'Secret',
      'Service',
      'ServiceMonitor',
    ]);
  });

  it('helm package makes the chart archive, which renders as the folder does', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'df-worker-helm-package-'));
    tempDirs.push(dir);
    const result = helm(['package', CHART_DIR, `--destination=${dir}`]);
    expect(result.code, result.stderr).toBe(0);
    const [archive, ...others] = await readdir(dir);
    expect(others).toEqual([]);
    expect(archive).toMatch(/^df-worker-\d+\.\d+\.\d+\.tgz$/);
    const clustered = [`--values=${path.join(CHART_DIR, 'examples/clustered.yaml')}`];
    expect(template(clustered, path.join(dir, archive!))).toEqual(template(clustered));
  });
});

describe('the schema check', () => {
  // Rendered in each test, so that a missing helm fails each one, naming .ci/install-helm.
  const deploymentOf = () => template(REQUIRED).find((m) => m.kind === 'Deployment')!;

  it('refuses a field of the wrong type, naming it', async () => {
    const deployment = deploymentOf();
    const spec = deployment.spec as Record<string, unknown>;
    expect(await schemaViolations({ ...deployment, spec: { ...spec, replicas: '1' } })).toEqual([
      'Deployment df-worker: data/spec/replicas must be integer',
    ]);
  });

  it('refuses a kind no schema package knows, so none slips through unchecked', async () => {
    const deployment = deploymentOf();
    expect(await schemaViolations({ ...deployment, apiVersion: 'apps/v9' })).toEqual([
      'Deployment df-worker: no schema for apiVersion apps/v9, kind Deployment',
    ]);
  });
});
