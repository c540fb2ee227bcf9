// The package as a user gets it: built, packed with `npm pack`, installed from the tarball into an empty project
// (`npm init -y`, so "type": "commonjs"), then the handler guide's path (handlers/README.md) through `npx df-worker`: new, run, check, the
// generated vitest file, and start against the emulator. Offline-capable: the project's lockfile pins the
// dependencies to this repo's package-lock.json, whose tarballs `npm ci` left in the npm cache.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { cp, mkdir, mkdtemp, readFile, rm, symlink } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nodeVersionProblem } from '../../src/runtime/node-version.ts';
import { childEnv, exec, firstMatch, packAndInstall, SETUP_MS, timeLeft } from './packed-project.ts';
import { REPO_ROOT } from './run-cli.ts';

/** A Node older than df-worker supports, found on the machine (e.g. the distribution's), to prove the guard. */
const OLD_NODE = ['/usr/bin/node', '/usr/local/bin/node'].find((file) => {
  if (!existsSync(file)) return false;
  try {
    const version = execFileSync(file, ['-p', 'process.versions.node'], { encoding: 'utf8' }).trim();
    return nodeVersionProblem(version) !== undefined;
  } catch {
    return false;
  }
});

let work: string;
let project: string;
let packedFiles: string[];

/** `npx df-worker <args>` in the project, as the hints and handlers/README.md say. */
const npx = (args: string[], env?: NodeJS.ProcessEnv) => exec('npx', ['df-worker', ...args], project, env);

beforeAll(async () => {
  const deadline = Date.now() + SETUP_MS;
  work = await mkdtemp(path.join(os.tmpdir(), 'df-worker-package-'));
  // A staging copy of what `npm pack` reads, built into its own dist/: the repo's dist/ may be stale or absent.
  const staging = path.join(work, 'staging');
  await mkdir(staging);
  await mkdir(path.join(staging, 'handlers'));
  for (const name of ['package.json', 'README.md', 'LICENSE', 'config', 'handlers/README.md']) {
    await cp(path.join(REPO_ROOT, name), path.join(staging, name), { recursive: true });
  }
  const tsc = path.join(REPO_ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
  const build = await exec(
    process.execPath,
    [tsc, '-p', path.join(REPO_ROOT, 'tsconfig.build.json'), '--outDir', path.join(staging, 'dist')],
    REPO_ROOT,
    childEnv(),
    timeLeft(deadline),
  );
  expect(build, 'tsc build').toMatchObject({ code: 0 });
  // --ignore-scripts: dist/ is built above; the staging copy has no src/ for prepack to build from.
  ({ packedFiles, project } = await packAndInstall(staging, work, ['--ignore-scripts'], deadline));
}, SETUP_MS);

afterAll(async () => {
  if (work !== undefined) await rm(work, { recursive: true, force: true });
});

describe('the packed package', () => {
  it('ships the compiled code, its types, the templates and the default config, without source maps', () => {
    expect(packedFiles).toEqual(
      expect.arrayContaining([
        'package.json',
        'config/default.json',
        'dist/index.js',
        'dist/index.d.ts',
        'dist/cli/main.js',
        'dist/cli/templates/handler.js',
        'dist/runtime/node-version.js',
      ]),
    );
    expect(packedFiles.filter((file) => file.endsWith('.map') || file.startsWith('dist/docs/'))).toEqual([]);
    // The month replay runs from source for bench/ and test/: nothing of it ships.
    expect(packedFiles.filter((file) => file.startsWith('dist/replay/'))).toEqual([]);
  });

  it('ships the user guides (the handler guide holds the ctx reference) and the license, not the examples', () => {
    expect(packedFiles).toEqual(
      expect.arrayContaining(['README.md', 'handlers/README.md', 'config/README.md', 'LICENSE']),
    );
    expect(packedFiles.filter((file) => file.startsWith('handlers/'))).toEqual(['handlers/README.md']);
  });

  it('scaffolds .mts files in a project without "type": "module", saying so, with npx hints', async () => {
    const manifest = await readFile(path.join(project, 'package.json'), 'utf8');
    // npm init writes "type": "commonjs" since npm 11 (none before): either way, not an ES module scope.
    expect(JSON.parse(manifest)).not.toMatchObject({ type: 'module' });
    const result = await npx(['new', 'my-task']);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toContain(`created ${path.join('handlers', 'my-task.mts')}\n`);
    expect(result.stdout).toContain(`created ${path.join('handlers', 'my-task.test.mts')}\n`);
    expect(result.stdout).toContain('package.json does not set "type": "module", so the files are .mts');
    expect(result.stdout).toContain(`npx df-worker run my-task --input '{"text":"hello"}'`);
    expect(result.stdout).toContain('npx df-worker check');
    expect(await readFile(path.join(project, 'package.json'), 'utf8')).toBe(manifest);
  });

  it('runs the new handler once with `run`', async () => {
    const result = await npx(['run', 'my-task', '--input', '{"text":"packed"}']);
    expect(result.code, result.stderr).toBe(0);
    expect(JSON.parse(result.stdout)).toEqual({ result: 'PACKED' });
    expect(result.stderr).toContain('my-task: COMPLETED, 1 attempt');
  });

  it('loads it with `check`', async () => {
    const result = await npx(['check']);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toContain('handlers: 1 loaded');
    expect(result.stdout).toContain('(my-task)');
  });

  it('passes the generated vitest file', async () => {
    // The project's own vitest would come from the registry; this repo's copy is the same package.
    await symlink(
      path.join(REPO_ROOT, 'node_modules', 'vitest'),
      path.join(project, 'node_modules', 'vitest'),
    );
    const vitest = path.join(project, 'node_modules', 'vitest', 'vitest.mjs');
    const result = await exec(
      process.execPath,
      [vitest, 'run'],
      project,
      childEnv({ CI: '', NO_COLOR: '1' }),
    );
    expect(result.code, `${result.stdout}\n${result.stderr}`).toBe(0);
    expect(result.stdout).toMatch(/Tests\s+2 passed/);
  });

  it('serves the task with `start` against the emulator, and drains on SIGTERM', async () => {
    const bin = path.join(project, 'node_modules', '.bin', 'df-worker');
    const emulator = spawn(process.execPath, [bin, 'emulator', '--port', '0', '--key', 'emulator-key'], {
      cwd: project,
      env: childEnv(),
    });
    try {
      const url = await firstMatch(emulator.stdout, /listening on (http:\/\/\S+)/);
      const env = childEnv({ DF_API_URL: url, DF_API_KEY: 'emulator-key', DF_HTTP_PORT: '0' });
      expect(await npx(['tasks', 'sync'], env)).toMatchObject({ code: 0 });
      const enqueued = await fetch(`${url}/__admin/executions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ taskKey: 'my-task', input: { text: 'served' } }),
      });
      expect(enqueued.status).toBe(201);

      const daemon = spawn(process.execPath, [bin, 'start'], { cwd: project, env });
      const exited = new Promise<number | null>((resolve) => daemon.once('exit', resolve));
      await firstMatch(daemon.stdout, /"msg":"execution reported"/);
      daemon.kill('SIGTERM');
      expect(await exited).toBe(0);

      const executions = (await (await fetch(`${url}/__admin/executions`)).json()) as {
        data: { status: string; output?: unknown }[];
      };
      expect(executions.data).toEqual([
        expect.objectContaining({ status: 'COMPLETED', output: { result: 'SERVED' } }),
      ]);
    } finally {
      emulator.kill('SIGTERM');
    }
  });

  it.skipIf(OLD_NODE === undefined)(
    'stops the bin and the import at once on an older Node, in one line naming the version',
    async () => {
      const old = OLD_NODE as string;
      const bin = path.join(project, 'node_modules', 'df-worker', 'dist', 'cli', 'main.js');
      const cli = await exec(old, [bin, 'new', 'other-task'], project);
      expect(cli.code).toBe(1);
      expect(cli.stderr).toMatch(
        /^df-worker needs Node\.js >= 22\.19; this is Node\.js \d+\.\d+\.\d+ \(.+\)\. .+\n$/,
      );
      expect(existsSync(path.join(project, 'handlers', 'other-task.mts'))).toBe(false);

      const imported = await exec(old, ['--input-type=module', '-e', "import 'df-worker';"], project);
      expect(imported.code).toBe(1);
      expect(imported.stderr).toContain('UnsupportedNodeError: df-worker needs Node.js >= 22.19;');
      expect(imported.stderr).not.toMatch(/undici|\n\s+at /);
    },
  );
});
