// The chart as the real helm renders it (helm 4, installed by .ci/install-helm into a cache folder), and every
// rendered object checked against the Kubernetes schemas and the prometheus-operator and KEDA CRDs
// (kubernetes-models and its @kubernetes-models/* packages, the same OpenAPI schemas the API server applies).
import { spawnSync } from 'node:child_process';
import { accessSync, constants, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';

export const CHART_DIR = fileURLToPath(new URL('../../helm/df-worker', import.meta.url));
export const INSTALL_HELM_SCRIPT = '.ci/install-helm';
/** The helm .ci/install-helm installs; the tests refuse another major. */
export const HELM_VERSION = '4.1.4';

export type Values = Record<string, unknown>;

function isObject(value: unknown): value is Values {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Helm's merge of a user values file over the chart's defaults: maps merge, null deletes, the rest replaces. */
export function coalesce(defaults: Values, overrides: Values): Values {
  const merged: Values = { ...defaults };
  for (const [key, value] of Object.entries(overrides)) {
    if (value === null) delete merged[key];
    else if (isObject(value) && isObject(merged[key])) merged[key] = coalesce(merged[key], value);
    else merged[key] = value;
  }
  return merged;
}

function executable(file: string): boolean {
  try {
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/**
 * The helm binary: $DF_HELM, else the one .ci/install-helm put in its cache folder ($DF_CI_HELM_DIR or
 * ~/.cache/df-worker-ci/helm-<version>), else `helm` on PATH. Throws, naming the script, when there is none:
 * the chart tests never skip silently.
 */
export function findHelm(): string {
  const fromEnv = process.env.DF_HELM;
  if (fromEnv !== undefined && fromEnv !== '') {
    if (!executable(fromEnv)) throw new Error(`DF_HELM is ${fromEnv}, which is not an executable file`);
    return fromEnv;
  }
  const cacheDir =
    process.env.DF_CI_HELM_DIR ?? path.join(os.homedir(), '.cache/df-worker-ci', `helm-${HELM_VERSION}`);
  const cached = path.join(cacheDir, 'helm');
  if (executable(cached)) return cached;
  const onPath = spawnSync('sh', ['-c', 'command -v helm'], { encoding: 'utf8' }).stdout.trim();
  if (onPath !== '') return onPath;
  throw new Error(
    `no helm: run ${INSTALL_HELM_SCRIPT} (it installs helm ${HELM_VERSION} into ${cacheDir}), or set DF_HELM to a helm 4 binary`,
  );
}

export interface HelmResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs helm to completion; a non-zero exit is returned, not thrown, so tests can show its output. */
export function helm(args: string[], options: { cwd?: string } = {}): HelmResult {
  const child = spawnSync(findHelm(), args, {
    encoding: 'utf8',
    cwd: options.cwd,
    // No kubeconfig is read: every command here runs client-side.
    env: { ...process.env, KUBECONFIG: '/dev/null', HELM_CACHE_HOME: os.tmpdir() },
    maxBuffer: 64 * 1024 * 1024,
  });
  if (child.error !== undefined) throw child.error;
  return { code: child.status ?? -1, stdout: child.stdout, stderr: child.stderr };
}

/** A template's `fail` (or values refused by values.schema.json): helm stopped, and this is what it said. */
export class ChartFailure extends Error {
  override name = 'ChartFailure';
}

export interface Release {
  name?: string;
  namespace?: string;
  /** helm's --skip-schema-validation: reaches a template's own `fail` for values the schema refuses first. */
  skipSchemaValidation?: boolean;
}

export interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  [field: string]: unknown;
}

export interface RenderedChart {
  manifests: Manifest[];
  /** NOTES.txt as `helm install` prints it. */
  notes: string;
}

/**
 * `helm install --dry-run=client` of the chart with `values` (a values file over values.yaml): the objects and
 * the notes. Throws a ChartFailure with the template's own message where a `fail` stops helm.
 */
export function renderChart(values: Values = {}, release: Release = {}): RenderedChart {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'df-worker-helm-'));
  try {
    const valuesFile = path.join(dir, 'values.json');
    writeFileSync(valuesFile, JSON.stringify(values));
    const result = helm([
      'install',
      release.name ?? 'df-worker',
      CHART_DIR,
      '--dry-run=client',
      '--output=json',
      `--namespace=${release.namespace ?? 'default'}`,
      `--values=${valuesFile}`,
      ...(release.skipSchemaValidation === true ? ['--skip-schema-validation'] : []),
    ]);
    if (result.code !== 0) {
      // "Error: execution error at (df-worker/templates/x.yaml:3:4): <the fail message>"
      const text = result.stderr
        .trim()
        .replace(/^Error: /, '')
        .replace(/^INSTALLATION FAILED: /, '');
      const failed = /^[^\n]*?execution error at \([^)]*\): ([\s\S]*)$/.exec(text);
      throw new ChartFailure(failed?.[1] ?? text);
    }
    const release_ = JSON.parse(result.stdout) as { manifest: string; info: { notes?: string } };
    return { manifests: parseManifests(release_.manifest), notes: release_.info.notes ?? '' };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The objects of a multi-document YAML stream, as helm prints them; throws on YAML that does not parse. */
export function parseManifests(text: string): Manifest[] {
  const manifests: Manifest[] = [];
  for (const document of parseAllDocuments(text)) {
    if (document.errors.length > 0)
      throw new Error(`helm rendered invalid YAML: ${document.errors[0]!.message}`);
    const object = document.toJS() as Manifest | null;
    if (object !== null) manifests.push(object);
  }
  return manifests;
}

export function renderManifests(values: Values = {}, release: Release = {}): Manifest[] {
  return renderChart(values, release).manifests;
}

export function renderNotes(values: Values = {}, release: Release = {}): string {
  return renderChart(values, release).notes;
}

interface ModelClass {
  apiVersion: string;
  kind: string;
  new (data: unknown): { validate(): void };
}

function isModelClass(value: unknown): value is ModelClass {
  return (
    typeof value === 'function' &&
    typeof (value as Partial<ModelClass>).apiVersion === 'string' &&
    typeof (value as Partial<ModelClass>).kind === 'string'
  );
}

/**
 * The package module holding an apiVersion's models: the prometheus-operator and KEDA CRDs in their own packages,
 * the rest in kubernetes-models. Only the groups rendered are imported (all of them take seconds).
 */
function modelModule(apiVersion: string): string {
  const group = apiVersion.includes('/') ? apiVersion.slice(0, apiVersion.indexOf('/')) : '';
  if (group === 'monitoring.coreos.com') return `@kubernetes-models/prometheus-operator/${apiVersion}`;
  if (group === 'keda.sh' || group === 'eventing.keda.sh') return `@kubernetes-models/keda/${apiVersion}`;
  return `kubernetes-models/${apiVersion}`;
}

const models = new Map<string, Promise<Record<string, unknown> | undefined>>();
async function modelOf(apiVersion: string, kind: string): Promise<ModelClass | undefined> {
  let module = models.get(apiVersion);
  if (module === undefined) {
    module = import(modelModule(apiVersion)).then(
      (loaded: Record<string, unknown>) => loaded,
      () => undefined,
    );
    models.set(apiVersion, module);
  }
  const model = (await module)?.[kind];
  return isModelClass(model) && model.apiVersion === apiVersion && model.kind === kind ? model : undefined;
}

/**
 * What the object's schema refuses, one message per object (empty when valid). An apiVersion and kind no package
 * knows is refused too, so a new kind cannot slip through unchecked.
 */
export async function schemaViolations(manifest: Manifest): Promise<string[]> {
  const where = `${manifest.kind} ${manifest.metadata?.name ?? '(no name)'}`;
  const model = await modelOf(manifest.apiVersion, manifest.kind);
  if (model === undefined)
    return [`${where}: no schema for apiVersion ${manifest.apiVersion}, kind ${manifest.kind}`];
  try {
    new model(manifest).validate();
    return [];
  } catch (error) {
    return [`${where}: ${(error as Error).message}`];
  }
}
