// How a new project should depend on df-worker so that `npm i` there installs the very package that made it:
// the spec the running copy was installed from (a tarball, a git repository, the registry), read from the
// package.json of the project whose node_modules holds it (npx's own cache folder included).
import { readFileSync } from 'node:fs';
import path from 'node:path';

export interface PackageSpec {
  /** The dependency spec for package.json, e.g. `^0.1.0`, `file:/abs/df-worker-0.1.0.tgz`, `github:o/r`. */
  spec: string;
  /**
   * Where it came from: `installed` (the installing project's package.json, npx's included), `clone` (a checkout
   * of the repository, linked as a folder), or `version` (nothing said how: the registry range of this version).
   */
  from: 'installed' | 'clone' | 'version';
}

const NAME = 'df-worker';

/**
 * The spec a new project should use for the df-worker in `packageRoot`, at `version`. A relative `file:` spec is
 * made absolute, since the new project lives elsewhere; a registry range becomes `^version`.
 */
export function installedPackageSpec(packageRoot: string, version: string): PackageSpec {
  const segments = path.resolve(packageRoot).split(path.sep);
  const nodeModules = segments.indexOf('node_modules');
  if (nodeModules === -1) return { spec: `file:${path.resolve(packageRoot)}`, from: 'clone' };
  const project = segments.slice(0, nodeModules).join(path.sep) || path.sep;
  const declared = declaredSpec(path.join(project, 'package.json'));
  const spec = declared === undefined ? undefined : usableSpec(declared, project);
  return spec === undefined ? { spec: `^${version}`, from: 'version' } : { spec, from: 'installed' };
}

function declaredSpec(manifestFile: string): string | undefined {
  let manifest: Record<string, unknown>;
  try {
    manifest = JSON.parse(readFileSync(manifestFile, 'utf8')) as Record<string, unknown>;
  } catch {
    return undefined; // no package.json (a global install's prefix) or not JSON: nothing to learn from it
  }
  for (const field of ['dependencies', 'devDependencies', 'optionalDependencies']) {
    const spec = (manifest[field] as Record<string, unknown> | undefined)?.[NAME];
    if (typeof spec === 'string') return spec;
  }
  return undefined;
}

/** The spec as the new project can use it, or undefined when it names the registry (a range or a tag). */
function usableSpec(spec: string, project: string): string | undefined {
  if (spec.startsWith('file:')) return `file:${path.resolve(project, spec.slice('file:'.length))}`;
  if (/^(\.{1,2}\/|\/|~\/)/.test(spec)) return `file:${path.resolve(project, spec)}`;
  // git (git+https:, github:, owner/repo shorthand) and tarball URLs hold wherever they are read.
  if (/^(git\+|git:|github:|gitlab:|bitbucket:|gist:|https?:)/.test(spec)) return spec;
  if (/^[\w.-]+\/[\w.-]+(#.*)?$/.test(spec)) return spec;
  return undefined;
}
