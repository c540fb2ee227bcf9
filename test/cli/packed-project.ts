// Helpers of the package tests: a project that installs df-worker from a tarball without the network, and the
// programs (npm, npx, the bin) run in it to completion or until their output shows a line.
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { REPO_ROOT } from './run-cli.ts';

const execFileAsync = promisify(execFile);

/** The child's environment: this run's Node first on PATH (npx runs on it), no DF_* or npm script variables. */
export function childEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (name.startsWith('DF_') || name === 'FORCE_COLOR') continue;
    if (name.startsWith('npm_') && name !== 'npm_config_cache') continue;
    env[name] = value;
  }
  env.PATH = `${path.dirname(process.execPath)}${path.delimiter}${process.env.PATH ?? ''}`;
  return { ...env, ...extra };
}

export interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs a program to completion in `cwd`, killed after `timeoutMs`; never rejects on a non-zero exit (the test
 * asserts the code).
 */
export async function exec(
  file: string,
  args: string[],
  cwd: string,
  env = childEnv(),
  timeoutMs = 60_000,
): Promise<Result> {
  try {
    const { stdout, stderr } = await execFileAsync(file, args, { cwd, env, timeout: timeoutMs });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code?: number | string; stdout?: string; stderr?: string };
    return {
      code: typeof failed.code === 'number' ? failed.code : null,
      stdout: failed.stdout ?? '',
      stderr: `${failed.stderr ?? ''}${typeof failed.code === 'string' ? failed.code : ''}`,
    };
  }
}

/**
 * Adds the tarball to the project as `npm i <tarball>` would, with a lockfile whose other entries are this
 * repo's production dependencies: `npm ci --prefer-offline` then finds every tarball in the npm cache.
 */
export async function pinDependencies(dir: string, file: string): Promise<void> {
  const lock = JSON.parse(await readFile(path.join(REPO_ROOT, 'package-lock.json'), 'utf8')) as {
    packages: Record<string, { dev?: boolean; version?: string } & Record<string, unknown>>;
  };
  const manifest = JSON.parse(await readFile(path.join(dir, 'package.json'), 'utf8')) as Record<
    string,
    unknown
  >;
  const ownRoot = lock.packages[''] ?? {};
  const spec = `file:${path.relative(dir, file)}`;
  manifest.dependencies = { 'df-worker': spec };
  await writeFile(path.join(dir, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  const integrity = `sha512-${createHash('sha512')
    .update(await readFile(file))
    .digest('base64')}`;
  const packages: Record<string, unknown> = {
    '': { name: manifest.name, version: manifest.version, dependencies: manifest.dependencies },
    'node_modules/df-worker': {
      version: ownRoot.version,
      resolved: spec,
      integrity,
      dependencies: ownRoot.dependencies,
      bin: ownRoot.bin,
      engines: ownRoot.engines,
    },
  };
  for (const [key, entry] of Object.entries(lock.packages)) {
    if (key !== '' && entry.dev !== true) packages[key] = entry;
  }
  const projectLock = {
    name: manifest.name,
    version: manifest.version,
    lockfileVersion: 3,
    requires: true,
    packages,
  };
  await writeFile(path.join(dir, 'package-lock.json'), `${JSON.stringify(projectLock, null, 2)}\n`);
}

/** Resolves with the first capture group of `pattern` once a child's output shows it. */
export function firstMatch(stream: NodeJS.ReadableStream, pattern: RegExp): Promise<string> {
  let text = '';
  return new Promise((resolve, reject) => {
    stream.setEncoding('utf8');
    stream.on('data', (chunk: string) => {
      text += chunk;
      const match = pattern.exec(text);
      if (match) resolve(match[1] ?? match[0]);
    });
    stream.once('end', () => reject(new Error(`output ended without ${String(pattern)}:\n${text}`)));
  });
}

/**
 * The bound of a package test's setup (a build, a pack and an install: about a minute on a quiet 2-core machine,
 * several beside busy forks). Its steps share it: each is killed at the time left (see `timeLeft`), so a slow
 * one fails naming itself before the hook's own timeout, and none is cut shorter than the whole allows.
 */
export const SETUP_MS = 300_000;

/** The time left until `deadline` for one step, minus a few seconds for the hook to report it. */
export function timeLeft(deadline: number): number {
  return Math.max(1_000, deadline - Date.now() - 5_000);
}

/** A packed tarball installed in a new `npm init -y` project under `work`, as a user installs it. */
export interface PackedProject {
  tarball: string;
  /** The paths the tarball holds. */
  packedFiles: string[];
  project: string;
}

/**
 * Packs `dir` into `work` (`packArgs` added to `npm pack`), then installs the tarball in `work/fresh-project`
 * from the npm cache, with its dependencies pinned (see pinDependencies).
 */
export async function packAndInstall(
  dir: string,
  work: string,
  packArgs: string[] = [],
  deadline = Date.now() + SETUP_MS,
): Promise<PackedProject> {
  const pack = await exec(
    'npm',
    ['pack', '--json', ...packArgs, '--pack-destination', work],
    dir,
    childEnv(),
    timeLeft(deadline),
  );
  if (pack.code !== 0) throw new Error(`npm pack in ${dir} exited ${pack.code}: ${pack.stderr}`);
  const [packed] = JSON.parse(pack.stdout) as [{ filename: string; files: { path: string }[] }];
  const tarball = path.join(work, packed.filename);
  const project = path.join(work, 'fresh-project');
  await mkdir(project);
  const init = await exec('npm', ['init', '-y'], project, childEnv(), timeLeft(deadline));
  if (init.code !== 0) throw new Error(`npm init -y exited ${init.code}: ${init.stderr}`);
  await pinDependencies(project, tarball);
  const install = await exec(
    'npm',
    ['ci', '--prefer-offline', '--no-audit', '--no-fund'],
    project,
    childEnv(),
    timeLeft(deadline),
  );
  if (install.code !== 0) throw new Error(`npm ci of the tarball exited ${install.code}: ${install.stderr}`);
  return { tarball, packedFiles: packed.files.map((file) => file.path), project };
}
