// `df-worker new`: the scaffold's files, its refusals, and proof that what it writes loads and passes its test.
import { execFile } from 'node:child_process';
import { readFile, readdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import * as prettier from 'prettier';
import { describe, expect, it } from 'vitest';
import { scaffoldHandler, ScaffoldExistsError, taskKeyProblem } from '../../src/cli/commands/new.ts';
import {
  handlerSource,
  handlerTestSource,
  SAMPLE_INPUT,
  SAMPLE_OUTPUT,
} from '../../src/cli/templates/handler.ts';
import { cli, REPO_ROOT, tempDir } from './run-cli.ts';

const loadAndRun = fileURLToPath(new URL('./fixtures/load-and-run.ts', import.meta.url));

describe('taskKeyProblem', () => {
  it.each(['enrich-product', 'csv_to_records', 'orders.v2', 'A1'])('accepts the key %j', (key) => {
    expect(taskKeyProblem(key)).toBeUndefined();
  });

  it.each([
    ['', /empty/],
    ['has space', /letters, digits/],
    ['../escape', /letters, digits/],
    ['a/b', /letters, digits/],
    ['.hidden', /starts with "\."/],
    ['_helper', /starts with "_"/],
    ['orders.test', /loader skips/],
    ['types.d', /loader skips/],
    ['x.spec.y', /loader skips/],
  ])('rejects the key %j, saying why', (key, reason) => {
    expect(taskKeyProblem(key)).toMatch(reason);
  });
});

describe('handler templates', () => {
  it.each(['ts', 'js'] as const)('are formatted as the project formats code (%s)', async (language) => {
    const options = await prettier.resolveConfig(path.join(REPO_ROOT, 'handlers', 'x.ts'));
    const parser = language === 'ts' ? 'typescript' : 'babel';
    for (const source of [handlerSource('my-task', language), handlerTestSource('my-task', language)]) {
      expect(await prettier.format(source, { ...options, parser })).toBe(source);
    }
  });

  it('types the TypeScript handler with type aliases and imports from df-worker', () => {
    const source = handlerSource('my-task', 'ts');
    expect(source).toContain("import { defineTask, NonRetryableError } from 'df-worker';");
    expect(source).toMatch(/^type Input = /m);
    expect(source).toContain('defineTask<Input, Output>({');
    expect(handlerSource('my-task', 'js')).not.toMatch(/type |<Input/);
  });
});

describe('scaffoldHandler', () => {
  it('creates the folder and writes the handler and its test', async () => {
    const dir = path.join(await tempDir(), 'new', 'handlers');
    const scaffold = await scaffoldHandler(dir, 'my-task', 'js');
    expect(scaffold).toMatchObject({
      handlerFile: path.join(dir, 'my-task.mjs'),
      testFile: path.join(dir, 'my-task.test.mjs'),
    });
    expect(await readFile(scaffold.testFile, 'utf8')).toContain("import task from './my-task.mjs';");
  });

  it('refuses when a handler for the key exists under another extension, writing nothing', async () => {
    const dir = await tempDir({ 'my-task.mjs': 'export default {};\n' });
    const refusal = scaffoldHandler(dir, 'my-task', 'ts');
    await expect(refusal).rejects.toBeInstanceOf(ScaffoldExistsError);
    await expect(refusal).rejects.toThrow(path.join(dir, 'my-task.mjs'));
    expect(await readdir(dir)).toEqual(['my-task.mjs']);
  });
});

describe('df-worker new', () => {
  it('writes the handler and its test, and prints them with the next commands', async () => {
    const project = await tempDir({ 'package.json': '{ "type": "module" }\n' });
    const dir = path.join(project, 'handlers');
    const result = await cli(['new', 'invoice-total', '--dir', dir]);
    expect(result).toMatchObject({ code: 0, stderr: '' });
    expect((await readdir(dir)).sort()).toEqual(['invoice-total.test.ts', 'invoice-total.ts']);
    expect(result.stdout).toContain(`created ${path.join(dir, 'invoice-total.ts')}\n`);
    expect(result.stdout).toContain(`created ${path.join(dir, 'invoice-total.test.ts')}\n`);
    expect(result.stdout).not.toContain('"type": "module"');
    // Run from this repo's source, the hints are the npm script that works in a clone.
    expect(result.stdout).toContain(
      `npm run cli -- run invoice-total --input '{"text":"hello"}' --dir ${dir}`,
    );
    expect(result.stdout).toContain('npm run cli -- tasks sync --dry-run');
  });

  it.each([
    ['"type": "commonjs"', { 'package.json': '{ "type": "commonjs" }\n' }],
    ['no "type"', { 'package.json': '{ "name": "x" }\n' }],
  ])(
    'writes .mts files under a package.json with %s, leaving it as it was and saying so',
    async (_, files) => {
      const project = await tempDir(files);
      const dir = path.join(project, 'handlers');
      const before = await readFile(path.join(project, 'package.json'), 'utf8');
      const result = await cli(['new', 'invoice-total', '--dir', dir]);
      expect(result).toMatchObject({ code: 0, stderr: '' });
      expect((await readdir(dir)).sort()).toEqual(['invoice-total.mts', 'invoice-total.test.mts']);
      expect(await readFile(path.join(dir, 'invoice-total.test.mts'), 'utf8')).toContain(
        "import task from './invoice-total.mts';",
      );
      expect(result.stdout).toContain(
        `note: ${path.join(project, 'package.json')} does not set "type": "module", so the files are .mts`,
      );
      expect(await readFile(path.join(project, 'package.json'), 'utf8')).toBe(before);
    },
  );

  it('refuses to overwrite an existing handler, naming it, and leaves it as it was', async () => {
    const dir = await tempDir({ 'invoice-total.ts': '// mine\n' });
    const result = await cli(['new', 'invoice-total', '--dir', dir]);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(`${path.join(dir, 'invoice-total.ts')} already exists`);
    expect(await readFile(path.join(dir, 'invoice-total.ts'), 'utf8')).toBe('// mine\n');
    expect(await readdir(dir)).toEqual(['invoice-total.ts']);
  });

  it('rejects a key that cannot be a file name with a usage error', async () => {
    const dir = await tempDir();
    const result = await cli(['new', '../outside', '--dir', dir]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('task key "../outside" may only hold letters, digits');
    expect(await readdir(dir)).toEqual([]);
  });

  it('scaffolds handlers that the loader loads and that pass their generated tests under real Node', async () => {
    const tsDir = await tempDir();
    const jsDir = await tempDir();
    await scaffoldHandler(tsDir, 'typed-task', 'ts');
    await scaffoldHandler(jsDir, 'plain-task', 'js');
    // A sibling the generated test does not know about must not change anything.
    await writeFile(path.join(tsDir, '_notes.ts'), 'this is not code\n');
    const jobs = [
      { dir: tsDir, key: 'typed-task', inputs: [SAMPLE_INPUT, {}] },
      { dir: jsDir, key: 'plain-task', inputs: [SAMPLE_INPUT, {}] },
    ];
    const { stdout } = await promisify(execFile)(process.execPath, [loadAndRun, JSON.stringify(jobs)], {
      cwd: REPO_ROOT,
    });
    const results = JSON.parse(stdout) as unknown[];
    for (const [index, key] of ['typed-task', 'plain-task'].entries()) {
      expect(results[index]).toEqual({
        loaded: [key],
        errors: [],
        outcomes: [
          { status: 'COMPLETED', output: SAMPLE_OUTPUT, attempts: 1 },
          {
            status: 'FAILED',
            output: {
              message: expect.stringContaining('"text"') as unknown,
              error: expect.stringContaining('"text"') as unknown,
              missingInputKeys: ['text'],
            },
            attempts: 0,
          },
        ],
      });
    }
  });
});
