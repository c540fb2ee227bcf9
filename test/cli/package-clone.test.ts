// The author's path from a clean clone: `git clone` of this repository's HEAD, `npm pack` with nothing built (the
// prepack script builds dist/), the tarball installed into an `npm init -y` project, then `npx df-worker --help`,
// `init`, and the commands and hints of the project it makes. What is committed is what gets packed: uncommitted
// changes are not in the clone. Offline-capable: the clone uses this repo's node_modules through a symlink, and the
// project's lockfile pins the dependencies to tarballs in the npm cache (see packed-project.ts).
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, realpath, rm, symlink } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SAMPLE_INPUT, SAMPLE_OUTPUT } from '../../src/cli/templates/handler.ts';
import { childEnv, exec, firstMatch, packAndInstall, SETUP_MS } from './packed-project.ts';
import { REPO_ROOT } from './run-cli.ts';

let work: string;
let clone: string;
let tarball: string;
let packedFiles: string[];
let project: string;
let worker: string;

beforeAll(async () => {
  const deadline = Date.now() + SETUP_MS;
  work = await mkdtemp(path.join(os.tmpdir(), 'df-worker-clone-'));
  clone = path.join(work, 'clone');
  const head = await exec('git', ['rev-parse', 'HEAD'], REPO_ROOT);
  expect(head.code, head.stderr).toBe(0);
  // --shared borrows the objects rather than copying them; the checkout is the commit under test.
  const cloned = await exec('git', ['clone', '--quiet', '--shared', '--no-checkout', REPO_ROOT, clone], work);
  expect(cloned.code, cloned.stderr).toBe(0);
  const checkout = await exec('git', ['checkout', '--quiet', '--detach', head.stdout.trim()], clone);
  expect(checkout.code, checkout.stderr).toBe(0);
  expect(existsSync(path.join(clone, 'dist'))).toBe(false);
  // npm ci's result, without the network: the same packages, linked.
  await symlink(await realpath(path.join(REPO_ROOT, 'node_modules')), path.join(clone, 'node_modules'));

  // A clone, a build (twice: prepack, then prepare), a pack and an install: 30 to 60 s on 2 busy cores.
  ({ tarball, packedFiles, project } = await packAndInstall(clone, work, [], deadline));
  worker = path.join(project, 'my-worker');
}, SETUP_MS);

afterAll(async () => {
  if (work !== undefined) await rm(work, { recursive: true, force: true });
});

describe('the package packed from a clean clone', () => {
  it('holds dist/, built by prepack, with the bin', () => {
    expect(packedFiles).toEqual(
      expect.arrayContaining(['package.json', 'dist/cli/main.js', 'dist/index.js', 'dist/index.d.ts']),
    );
    expect(packedFiles.filter((file) => file.endsWith('.map'))).toEqual([]);
  });

  it('runs `npx df-worker --help` in a project that installed it, listing init', async () => {
    const result = await exec('npx', ['df-worker', '--help'], project);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toMatch(/^ {2}init +scaffold a new project/m);
    expect(result.stdout).toContain('Run `npx df-worker <command> --help`');
  });

  it('inits a project that depends on the tarball by its absolute path', async () => {
    const result = await exec('npx', ['df-worker', 'init', 'my-worker'], project);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toContain(`df-worker dependency: file:${tarball}\n`);
    expect(result.stdout).toContain('  cd my-worker && npm i && npm run dev\n');
    const manifest = JSON.parse(await readFile(path.join(worker, 'package.json'), 'utf8')) as {
      type: string;
      dependencies: Record<string, string>;
    };
    expect(manifest).toMatchObject({ type: 'module', dependencies: { 'df-worker': `file:${tarball}` } });
  });

  it('runs the new project’s handler with `run` and loads it with `check`', async () => {
    // `npm i` there would need the registry (vitest, @types/node): it shares the installed project's modules.
    await symlink(path.join(project, 'node_modules'), path.join(worker, 'node_modules'));
    const run = await exec(
      'npx',
      ['df-worker', 'run', 'my-task', '--input', JSON.stringify(SAMPLE_INPUT)],
      worker,
    );
    expect(run.code, run.stderr).toBe(0);
    expect(JSON.parse(run.stdout)).toEqual(SAMPLE_OUTPUT);
    const check = await exec('npx', ['df-worker', 'check'], worker);
    expect(check.code, check.stderr).toBe(0);
    expect(check.stdout).toContain('handlers: 1 loaded');
  });

  it('says `npx df-worker dev` where the package is under node_modules: the session error and the banner', async () => {
    const enqueue = await exec('npx', ['df-worker', 'dev', '--enqueue', 'my-task'], worker);
    expect(enqueue.code).toBe(1);
    expect(enqueue.stderr).toContain('start one with `npx df-worker dev`');

    const bin = path.join(project, 'node_modules', '.bin', 'df-worker');
    const dev = spawn(process.execPath, [bin, 'dev', '--port', '0'], { cwd: worker, env: childEnv() });
    const exited = new Promise<number | null>((resolve) => dev.once('exit', resolve));
    const timer = setTimeout(() => dev.kill('SIGKILL'), 60_000);
    try {
      const hint = await firstMatch(dev.stdout, /Enqueue from another terminal:\n {2}(.+)\n/);
      expect(hint).toBe(`npx df-worker dev --enqueue my-task '{"text":"..."}'`);
    } finally {
      dev.kill('SIGTERM');
      expect(await exited).toBe(0);
      clearTimeout(timer);
    }
  });
});
