// The command a user types to run this CLI where it is running now, for the hints it prints: `npx df-worker` in a
// project that installed the package, `df-worker` from a global install, `npm run cli --` in a clone of the repo,
// `npx <spec>` when npx ran it from a tarball or a git spec.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { installedPackageSpec } from './package-spec.ts';

/** The folder holding df-worker's package.json: the parent of src/ or dist/. */
export const PACKAGE_ROOT = fileURLToPath(new URL('../..', import.meta.url));

/**
 * How to invoke df-worker from `cwd`, given the package's folder: outside any `node_modules` it is a clone (npm
 * scripts run the source); in npx's own cache, npx with the spec it ran; under the `node_modules` of a folder
 * holding `cwd` (pnpm's `.pnpm/` store included), npx finds its bin; under any other `node_modules` (a global
 * install) the bin is on PATH.
 */
export function cliInvocation(packageRoot: string = PACKAGE_ROOT, cwd: string = process.cwd()): string {
  const segments = path.resolve(packageRoot).split(path.sep);
  const nodeModules = segments.indexOf('node_modules');
  if (nodeModules === -1) return 'npm run cli --';
  const project = segments.slice(0, nodeModules).join(path.sep) || path.sep;
  // npx installs into a folder of its own (~/.npm/_npx/<hash>): the bin is on no PATH, so the hint is npx again,
  // with the spec it was run from (a tarball by its absolute path, a git spec).
  if (path.basename(path.dirname(project)) === '_npx') {
    const installed = installedPackageSpec(packageRoot, '');
    if (installed.from !== 'installed') return 'npx df-worker';
    const spec = installed.spec.startsWith('file:') ? installed.spec.slice('file:'.length) : installed.spec;
    return `npx ${shellQuote(spec)}`;
  }
  const relative = path.relative(project, path.resolve(cwd));
  const inProject = relative === '' || (!relative.startsWith('..') && !path.isAbsolute(relative));
  return inProject ? 'npx df-worker' : 'df-worker';
}

/** `df-worker <args>` as it should be typed here, e.g. `npx df-worker run my-task`. */
export function cliCommand(args: string): string {
  return `${cliInvocation()} ${args}`;
}

/** Quotes for a POSIX shell only when needed, so printed commands can be pasted as they are. */
export function shellQuote(text: string): string {
  return /^[\w./:@%+=-]+$/.test(text) ? text : `'${text.replaceAll("'", `'\\''`)}'`;
}
