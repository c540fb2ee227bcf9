// `df-worker init`: the project it writes, the spec it depends on, its refusal of a folder in use, and proof that
// the project works as generated: its handler's test passes, `check` loads it, `run` completes it, and the
// README's example handler runs in it as written.
import { execFile } from 'node:child_process';
import { mkdir, readdir, readFile, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { projectName } from '../../src/cli/commands/init.ts';
import { installedPackageSpec } from '../../src/cli/package-spec.ts';
import { SAMPLE_INPUT, SAMPLE_OUTPUT } from '../../src/cli/templates/handler.ts';
import { cli, REPO_ROOT, tempDir } from './run-cli.ts';

const PROJECT_FILES = [
  '.dockerignore',
  '.gitignore',
  'Dockerfile',
  'README.md',
  'handlers/my-task.test.ts',
  'handlers/my-task.ts',
  'package.json',
  'tsconfig.json',
];

async function listFiles(dir: string, prefix = ''): Promise<string[]> {
  const found: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const name = path.posix.join(prefix, entry.name);
    if (entry.isDirectory()) found.push(...(await listFiles(path.join(dir, entry.name), name)));
    else found.push(name);
  }
  return found.sort();
}

/**
 * What `npm i` would give the project, from this checkout: df-worker (from source, by the df-worker-source
 * condition) and vitest, linked into its node_modules.
 */
async function linkDependencies(project: string): Promise<void> {
  await mkdir(path.join(project, 'node_modules'));
  await symlink(REPO_ROOT, path.join(project, 'node_modules', 'df-worker'));
  await symlink(path.join(REPO_ROOT, 'node_modules', 'vitest'), path.join(project, 'node_modules', 'vitest'));
}

/** The README's example handler: its file name (from its first comment) and its code. */
async function readmeHandler(): Promise<{ file: string; code: string; runInput: string }> {
  const readme = await readFile(path.join(REPO_ROOT, 'README.md'), 'utf8');
  const code = /## A handler\n[\s\S]*?```ts\n([\s\S]*?)```/.exec(readme)?.[1];
  expect(code, 'a ```ts block under "## A handler"').toBeDefined();
  const file = /^\/\/ (handlers\/[\w.-]+\.ts)\b/.exec(code!)?.[1];
  expect(file, 'the block starts with a comment naming its file, handlers/<key>.ts').toBeDefined();
  const key = path.basename(file!, '.ts');
  const runInput = new RegExp(`npx df-worker run ${key} --input '([^']+)'`).exec(readme)?.[1];
  expect(runInput, `README.md says how to run ${key}`).toBeDefined();
  return { file: file!, code: code!, runInput: runInput! };
}

describe('installedPackageSpec', () => {
  it('depends on the tarball npx ran, by its absolute path', async () => {
    const cache = await tempDir({
      // npm saves the spec relative to npx's own folder: ~/.npm/_npx/<hash>/package.json
      '_npx/4f2a/package.json': JSON.stringify({
        dependencies: { 'df-worker': 'file:../../work/df-worker-0.1.0.tgz' },
      }),
    });
    const root = path.join(cache, '_npx', '4f2a', 'node_modules', 'df-worker');
    expect(installedPackageSpec(root, '0.1.0')).toEqual({
      spec: `file:${path.join(cache, 'work', 'df-worker-0.1.0.tgz')}`,
      from: 'installed',
    });
  });

  it.each(['github:df-worker/df-worker', 'df-worker/df-worker#main', 'git+https://example.com/x.git'])(
    'keeps the git spec %s as it is',
    async (spec) => {
      const project = await tempDir({
        'package.json': JSON.stringify({ dependencies: { 'df-worker': spec } }),
      });
      const root = path.join(project, 'node_modules', 'df-worker');
      expect(installedPackageSpec(root, '0.1.0')).toEqual({ spec, from: 'installed' });
    },
  );

  it('uses ^version for the registry, or when nothing says where it came from', async () => {
    const project = await tempDir({
      'package.json': JSON.stringify({ devDependencies: { 'df-worker': 'latest' } }),
    });
    const global = await tempDir();
    for (const root of [project, global]) {
      expect(installedPackageSpec(path.join(root, 'node_modules', 'df-worker'), '0.3.1')).toEqual({
        spec: '^0.3.1',
        from: 'version',
      });
    }
  });

  it('links a clone of the repository as a folder', () => {
    expect(installedPackageSpec('/home/me/df-worker', '0.1.0')).toEqual({
      spec: 'file:/home/me/df-worker',
      from: 'clone',
    });
  });
});

describe('df-worker init', () => {
  it('names the project after its folder, as npm allows', () => {
    expect(projectName('/tmp/My Worker!')).toBe('my-worker');
    expect(projectName('/tmp/_x')).toBe('x');
  });

  it('writes the project into a new folder and prints the exact next commands', async () => {
    const cwd = await tempDir();
    const result = await cli(
      ['init', 'my-worker', '--package-spec', 'file:/opt/df-worker-0.1.0.tgz'],
      {},
      cwd,
    );
    expect(result).toMatchObject({ code: 0, stderr: '' });
    const project = path.join(cwd, 'my-worker');
    expect(await listFiles(project)).toEqual(PROJECT_FILES);
    expect(result.stdout).toContain(`created ${path.join('my-worker', 'handlers', 'my-task.ts')}\n`);
    expect(result.stdout).toContain('  cd my-worker && npm i && npm run dev\n');
    expect(result.stdout).toContain(`npx df-worker dev --enqueue my-task '{"text":"hello"}'`);

    const manifest = JSON.parse(await readFile(path.join(project, 'package.json'), 'utf8')) as Record<
      string,
      unknown
    >;
    const own = JSON.parse(await readFile(path.join(REPO_ROOT, 'package.json'), 'utf8')) as {
      version: string;
      devDependencies: Record<string, string>;
    };
    expect(manifest).toMatchObject({
      name: 'my-worker',
      type: 'module',
      scripts: {
        dev: 'df-worker dev',
        test: 'vitest run',
        check: 'df-worker check',
        start: 'df-worker start',
      },
      dependencies: { 'df-worker': 'file:/opt/df-worker-0.1.0.tgz' },
      devDependencies: { vitest: own.devDependencies.vitest },
    });
    const tsconfig = JSON.parse(await readFile(path.join(project, 'tsconfig.json'), 'utf8')) as {
      compilerOptions: Record<string, unknown>;
    };
    expect(tsconfig.compilerOptions).toMatchObject({
      noEmit: true,
      erasableSyntaxOnly: true,
      allowImportingTsExtensions: true,
      module: 'nodenext',
      verbatimModuleSyntax: true,
    });
    const dockerfile = await readFile(path.join(project, 'Dockerfile'), 'utf8');
    expect(dockerfile).toMatch(new RegExp(`^FROM df-worker:${own.version.replaceAll('.', '\\.')}$`, 'm'));
    expect(dockerfile).toContain('COPY handlers/ /app/handlers/\n');
    expect(dockerfile.trimEnd().split('\n').at(-1)).toBe('USER 1000:1000');
    expect(await readFile(path.join(project, '.gitignore'), 'utf8')).toMatch(/^node_modules\/$/m);
  });

  it('refuses a folder in use, naming what it would overwrite; --force writes over it', async () => {
    const project = await tempDir({ 'package.json': '{ "name": "mine" }\n', 'notes.txt': 'keep\n' });
    const refused = await cli(['init', project], {}, project);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('DFW_CLI_INIT_NOT_EMPTY');
    expect(refused.stderr).toContain(`${project} is not empty (it would overwrite package.json)`);
    expect(refused.stderr).toContain('--force');
    expect(await listFiles(project)).toEqual(['notes.txt', 'package.json']);
    expect(await readFile(path.join(project, 'package.json'), 'utf8')).toBe('{ "name": "mine" }\n');

    const forced = await cli(['init', '--force'], {}, project);
    expect(forced).toMatchObject({ code: 0, stderr: '' });
    expect(forced.stdout).toContain('  npm i && npm run dev\n');
    expect(await listFiles(project)).toEqual([...PROJECT_FILES, 'notes.txt'].sort());
    expect(await readFile(path.join(project, 'notes.txt'), 'utf8')).toBe('keep\n');
  });

  it('writes into a folder that holds only .git', async () => {
    const project = await tempDir({ '.git/HEAD': 'ref: refs/heads/main\n' });
    expect(await cli(['init'], {}, project)).toMatchObject({ code: 0, stderr: '' });
    expect(await readdir(path.join(project, 'handlers'))).toEqual(['my-task.test.ts', 'my-task.ts']);
  });

  it('makes a project whose handler passes its test, loads with check and completes with run', async () => {
    const cwd = await tempDir();
    expect(await cli(['init', 'worker'], {}, cwd)).toMatchObject({ code: 0, stderr: '' });
    const project = path.join(cwd, 'worker');
    await linkDependencies(project);

    // The df-worker link leads out of node_modules, so Vite resolves it as source, by its own conditions rather
    // than Node's: this config (beside the project, not in it) names the source condition to Vite too, so the
    // test runs the checkout's src/ rather than whatever dist/ holds (or needing one built).
    const config = path.join(cwd, 'vitest.source.config.mjs');
    await writeFile(
      config,
      `const conditions = ['df-worker-source', 'module', 'node', 'import', 'default'];\n` +
        `export default { root: ${JSON.stringify(project)}, resolve: { conditions }, ssr: { resolve: { conditions } } };\n`,
    );
    const tests = await promisify(execFile)(
      process.execPath,
      [path.join(project, 'node_modules', 'vitest', 'vitest.mjs'), 'run', '--config', config],
      {
        cwd: project,
        timeout: 60_000,
        env: { ...process.env, CI: '1', NO_COLOR: '1', NODE_OPTIONS: '--conditions=df-worker-source' },
      },
    );
    expect(tests.stdout).toMatch(/Tests\s+2 passed/);

    const check = await cli(['check'], {}, project);
    expect(check.code, check.stderr).toBe(0);
    expect(check.stdout).toContain('handlers: 1 loaded');

    const run = await cli(['run', 'my-task', '--input', JSON.stringify(SAMPLE_INPUT)], {}, project);
    expect(run.code, run.stderr).toBe(0);
    expect(JSON.parse(run.stdout)).toEqual(SAMPLE_OUTPUT);
    expect(run.stderr).toContain('my-task: COMPLETED, 1 attempt');

    // The README's example, saved where its comment says, runs in the project as written.
    const example = await readmeHandler();
    await writeFile(path.join(project, example.file), example.code);
    const key = path.basename(example.file, '.ts');
    const readmeRun = await cli(['run', key, '--input', example.runInput], {}, project);
    expect(readmeRun.code, readmeRun.stderr).toBe(0);
    expect(readmeRun.stderr).toContain(`${key}: COMPLETED, 1 attempt`);
    expect(Object.keys(JSON.parse(readmeRun.stdout) as object)).toEqual(['slug']);
    const checkBoth = await cli(['check'], {}, project);
    expect(checkBoth.code, checkBoth.stderr).toBe(0);
    expect(checkBoth.stdout).toContain('handlers: 2 loaded');
  }, 90_000);
});
