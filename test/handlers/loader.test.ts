import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import {
  HandlerLoadError,
  HandlerLoadErrors,
  HandlersDirectoryError,
} from '../../src/handlers/load-errors.ts';
import { loadHandlers, loadHandlersOrThrow } from '../../src/handlers/loader.ts';

const repoRoot = fileURLToPath(new URL('../..', import.meta.url));
const harness = fileURLToPath(new URL('./fixtures/print-loaded-handlers.ts', import.meta.url));
const tempDirs: string[] = [];

async function handlersDir(files: Record<string, string>): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'df-worker-handlers-'));
  tempDirs.push(dir);
  for (const [name, text] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(dir, name)), { recursive: true });
    await writeFile(path.join(dir, name), text);
  }
  return dir;
}

afterEach(async () => {
  await Promise.all(tempDirs.splice(0).map((dir) => rm(dir, { recursive: true, force: true })));
});

const plainTask = (key: string) => `export default { key: ${JSON.stringify(key)}, handle: () => ({}) };\n`;

// Inside vitest, `import()` goes through vitest's own transpiler; these tests cover what does not depend on how a
// file is compiled. Type stripping, syntax errors and the 'df-worker' resolve hook are tested under real Node below.
describe('loadHandlers', () => {
  it('loads .ts, .mts, .js and .mjs handlers at the top level, keyed by task key', async () => {
    const dir = await handlersDir({
      'a.ts': `const retryCount: number = 2;\nexport default { key: 'a', retryCount, inputKeys: ['x'], handle: () => ({}) };\n`,
      'b.mts': plainTask('b'),
      'c.js': plainTask('c'),
      'd.mjs': plainTask('d'),
    });
    const { handlers, errors } = await loadHandlers(dir);
    expect(errors).toEqual([]);
    expect([...handlers.keys()].sort()).toEqual(['a', 'b', 'c', 'd']);
    expect(handlers.get('a')).toMatchObject({
      key: 'a',
      retryCount: 2,
      inputKeys: [{ key: 'x', description: '' }],
      file: path.join(dir, 'a.ts'),
    });
  });

  it('skips tests, specs, declarations, helpers, hidden files, other extensions and subdirectories', async () => {
    const broken = 'this is not JavaScript';
    const dir = await handlersDir({
      'task.ts': plainTask('task'),
      'task.test.ts': broken,
      'task.spec.mjs': broken,
      'types.d.ts': broken,
      '_helpers.ts': broken,
      '.draft.ts': broken,
      'notes.md': broken,
      'data.json': broken,
      'nested/other.ts': broken,
    });
    const { handlers, errors } = await loadHandlers(dir);
    expect(errors).toEqual([]);
    expect([...handlers.keys()]).toEqual(['task']);
  });

  it('logs one line per loaded handler', async () => {
    const dir = await handlersDir({ 'a.mjs': plainTask('a') });
    const lines: Array<Record<string, unknown>> = [];
    const logger = pino(
      { level: 'info' },
      { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) },
    );
    await loadHandlers(dir, { logger });
    expect(lines).toMatchObject([{ msg: 'loaded handler', taskKey: 'a', file: path.join(dir, 'a.mjs') }]);
  });

  it('fails on a missing directory, naming it and the DF_HANDLERS_DIR setting', async () => {
    const missing = path.join(os.tmpdir(), `df-worker-no-such-dir-${process.pid}`);
    const failure = loadHandlers(missing);
    await expect(failure).rejects.toBeInstanceOf(HandlersDirectoryError);
    await expect(failure).rejects.toThrow(`handlers directory "${missing}" does not exist`);
    await expect(failure).rejects.toThrow('DF_HANDLERS_DIR');
  });

  it('loads the handlers beside a README.md and its screenshots, and reports nothing about them (handlers/ holds the handler guide)', async () => {
    const dir = await handlersDir({
      'a.mjs': plainTask('a'),
      'README.md': '# Writing handlers\n',
      'console-executions.png': '\x89PNG\r\n',
    });
    const { handlers, errors } = await loadHandlers(dir);
    expect([...handlers.keys()]).toEqual(['a']);
    expect(errors).toEqual([]);
  });

  it('fails on a directory without handler modules', async () => {
    const dir = await handlersDir({ 'README.md': '# handlers', '_shared.ts': 'export {};' });
    await expect(loadHandlers(dir)).rejects.toThrow(`no handler modules in "${dir}"`);
  });

  it('reports a module without a default export, naming the file', async () => {
    const dir = await handlersDir({ 'ok.mjs': plainTask('ok'), 'named.mjs': 'export const task = {};\n' });
    const { handlers, errors } = await loadHandlers(dir);
    expect([...handlers.keys()]).toEqual(['ok']);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toBeInstanceOf(HandlerLoadError);
    expect(errors[0]!.file).toBe(path.join(dir, 'named.mjs'));
    expect(errors[0]!.message).toBe(
      `${path.join(dir, 'named.mjs')}: has no default export; end the module with ` +
        '`export default defineTask({ key: ..., handle(input, ctx) {...} })` ' +
        '(a helper module that is not a handler: name it _named.mjs or move it into a subfolder)',
    );
  });

  it('tells how to keep a helper module next to the handlers, and skips it once renamed or moved', async () => {
    const helper = 'export const greet = (name) => `hello ${name}`;\n';
    const dir = await handlersDir({ 'ok.mjs': plainTask('ok'), 'helpers.mjs': helper });
    const { errors } = await loadHandlers(dir);
    expect(errors.map((e) => e.message)).toEqual([
      expect.stringContaining('name it _helpers.mjs or move it into a subfolder') as unknown,
    ]);

    const fixed = await handlersDir({
      'ok.mjs': plainTask('ok'),
      '_helpers.mjs': helper,
      'lib/helpers.mjs': helper,
    });
    const result = await loadHandlers(fixed);
    expect(result.errors).toEqual([]);
    expect([...result.handlers.keys()]).toEqual(['ok']);
  });

  it('reports a default export that is not a task', async () => {
    const dir = await handlersDir({
      'fn.mjs': 'export default function handle() { return {}; }\n',
      'num.mjs': 'export default 42;\n',
    });
    const { errors } = await loadHandlers(dir);
    expect(errors.map((e) => e.message)).toEqual([
      expect.stringMatching(/fn\.mjs: default export is a function, not a task/),
      expect.stringMatching(/num\.mjs: default export is a number, not a task/),
    ]);
  });

  it('reports a plain object whose key is not a string, naming the file and the member', async () => {
    const dir = await handlersDir({ 'bad-key.mjs': 'export default { key: 42, handle: () => ({}) };\n' });
    const { errors } = await loadHandlers(dir);
    expect(errors).toHaveLength(1);
    expect(errors[0]!.message).toContain(
      `${path.join(dir, 'bad-key.mjs')}: default export is not a valid task`,
    );
    expect(errors[0]!.message).toContain('key: must be a non-empty string, got 42');
  });

  it('reports a module that throws while importing', async () => {
    const dir = await handlersDir({ 'boom.mjs': "throw new Error('missing API_TOKEN');\n" });
    const { errors } = await loadHandlers(dir);
    expect(errors.map((e) => e.message)).toEqual([
      `${path.join(dir, 'boom.mjs')}: failed while importing: missing API_TOKEN`,
    ]);
  });

  it('reports a task key defined in two files, naming both, and loads neither', async () => {
    const dir = await handlersDir({ 'one.mjs': plainTask('same'), 'two.ts': plainTask('same') });
    const { handlers, errors } = await loadHandlers(dir);
    expect(handlers.size).toBe(0);
    expect(errors).toHaveLength(1);
    expect(errors[0]!.message).toContain(
      `task key "same" is defined in "${path.join(dir, 'one.mjs')}" and "${path.join(dir, 'two.ts')}"`,
    );
  });
});

describe('loadHandlersOrThrow', () => {
  it('throws one HandlerLoadErrors listing every broken file', async () => {
    const dir = await handlersDir({
      'good.mjs': plainTask('good'),
      'no-default.mjs': 'export {};\n',
      'bad-retry.mjs': "export default { key: 'r', retryCount: -1, handle: () => ({}) };\n",
    });
    const error = await loadHandlersOrThrow(dir).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(HandlerLoadErrors);
    const aggregate = error as HandlerLoadErrors;
    expect(aggregate.errors.map((e) => path.basename(e.file))).toEqual(['bad-retry.mjs', 'no-default.mjs']);
    expect(aggregate.message).toMatch(/^2 handler modules in ".*" failed to load/);
    expect(aggregate.message).toContain('bad-retry.mjs: default export is not a valid task');
    expect(aggregate.message).toContain('no-default.mjs: has no default export');
  });

  it('returns the handlers when every file loads', async () => {
    const dir = await handlersDir({ 'good.mjs': plainTask('good') });
    expect([...(await loadHandlersOrThrow(dir)).keys()]).toEqual(['good']);
  });
});

interface HarnessResult {
  loaded?: Array<{ key: string; file: string; inputKeys: string[]; sharesPublicApi?: boolean }>;
  errors?: Array<{ name: string; file: string; message: string }>;
  thrown?: { name: string; message: string };
}

/** Loads `dir` in a child process under the Node running these tests (the project's Node 24 under npm). */
async function loadWithNode(dir: string): Promise<HarnessResult> {
  const { stdout } = await promisify(execFile)(process.execPath, [harness, dir], { cwd: repoRoot });
  return JSON.parse(stdout) as HarnessResult;
}

describe('loadHandlers under Node (child process)', () => {
  it('loads handlers outside the package that import defineTask from df-worker, sharing one module instance', async () => {
    const dir = await handlersDir({
      'outside.ts': [
        "import { defineTask, NonRetryableError } from 'df-worker';",
        'export { defineTask };',
        'type Input = { sku: string };',
        'export default defineTask<Input>({',
        "  key: 'outside',",
        "  inputKeys: ['sku'],",
        '  handle(input) {',
        "    if (input.sku === '') throw new NonRetryableError('empty sku');",
        '    return { sku: input.sku };',
        '  },',
        '});',
      ].join('\n'),
    });
    const result = await loadWithNode(dir);
    expect(result.errors).toEqual([]);
    expect(result.loaded).toEqual([
      { key: 'outside', file: path.join(dir, 'outside.ts'), inputKeys: ['sku'], sharesPublicApi: true },
    ]);
  });

  it('reports a syntax error with the file and, for TypeScript, the line', async () => {
    const dir = await handlersDir({
      'broken.ts': "const a: number = 1;\n\nexport default { key: 'b', handle: () => ({}) ;\n",
      'broken.mjs': "export default { key: 'c', handle: () => ({}) ;\n",
    });
    const { errors } = await loadWithNode(dir);
    expect(errors).toEqual([
      expect.objectContaining({
        file: path.join(dir, 'broken.mjs'),
        message: expect.stringMatching(/broken\.mjs: syntax error: /) as unknown,
      }),
      expect.objectContaining({
        file: path.join(dir, 'broken.ts'),
        message: expect.stringMatching(/broken\.ts: syntax error: .* \(line 3\)$/) as unknown,
      }),
    ]);
  });

  it('tells the author of a handler using an enum to use erasable TypeScript only', async () => {
    const dir = await handlersDir({
      'with-enum.ts':
        "enum Mode { Fast, Safe }\nexport default { key: 'e', handle: () => ({ mode: Mode.Fast }) };\n",
    });
    const { errors } = await loadWithNode(dir);
    expect(errors).toHaveLength(1);
    expect(errors![0]!.message).toContain(
      `${path.join(dir, 'with-enum.ts')}: use erasable TypeScript syntax only (no enum, namespace, parameter properties)`,
    );
  });

  it('names both fixes for an ES module handler in a CommonJS project, and loads it once one is applied', async () => {
    // npm init -y writes "type": "commonjs": the README's `.ts` handler then fails as CommonJS.
    const project = await handlersDir({
      'package.json': '{ "name": "my-project", "type": "commonjs" }\n',
      'handlers/slugify.ts': [
        "import { defineTask } from 'df-worker';",
        "export default defineTask({ key: 'slugify', handle: () => ({}) });",
      ].join('\n'),
      'handlers/plain.js': "export default { key: 'plain', handle: () => ({}) };\n",
    });
    const manifest = path.join(project, 'package.json');
    const { errors } = await loadWithNode(path.join(project, 'handlers'));
    expect(errors?.map((e) => e.message)).toEqual([
      expect.stringContaining(
        `plain.js: is an ES module (it uses import/export), but Node loads it as CommonJS because ${manifest} ` +
          `does not say "type": "module"; rename it to plain.mjs, or add "type": "module" to ${manifest}`,
      ),
      expect.stringContaining(
        `slugify.ts: is an ES module (it uses import/export), but Node loads it as CommonJS`,
      ),
    ]);
    expect(errors![1]!.message).toContain(`rename it to slugify.mts, or add "type": "module" to ${manifest}`);

    await writeFile(manifest, '{ "name": "my-project", "type": "module" }\n');
    const fixed = await loadWithNode(path.join(project, 'handlers'));
    expect(fixed.errors).toEqual([]);
    expect(fixed.loaded?.map((h) => h.key)).toEqual(['plain', 'slugify']);
  });

  it("loads the repository's example handlers and skips their tests", async () => {
    const result = await loadWithNode('handlers');
    expect(result.errors).toEqual([]);
    expect(result.loaded?.map((h) => h.key)).toEqual(['csv-to-records', 'enrich-product', 'notify-webhook']);
  });
});
