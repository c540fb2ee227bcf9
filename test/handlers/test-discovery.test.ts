// `npm test` runs the handlers' own tests in every language `df-worker new` writes them in (.ts, and .mjs with --js).
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';

const repoRoot = fileURLToPath(new URL('../..', import.meta.url));
const vitestBin = path.join(repoRoot, 'node_modules/vitest/vitest.mjs');
const tempDirs: string[] = [];

afterEach(async () => {
  await Promise.all(tempDirs.splice(0).map((dir) => rm(dir, { recursive: true, force: true })));
});

/** Test files the project's vitest config picks up in `root` (only listed, not run), given `filters`. */
async function listedTestFiles(root: string, filters: string[] = []): Promise<string[]> {
  const args = [vitestBin, 'list', '--filesOnly', '--root', root];
  args.push('--config', path.join(repoRoot, 'vitest.config.ts'), ...filters);
  const child = spawn(process.execPath, args, {
    cwd: root,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: process.env,
  });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
  if (code !== 0) throw new Error(`vitest list exited ${code}: ${stderr}`);
  // Each line names the vitest project that runs the file first ('[parallel] handlers/a.test.ts').
  return stdout
    .split('\n')
    .map((line) => line.replace(/^\s*\[[\w-]+\]/, '').trim())
    .filter((line) => line !== '')
    .sort();
}

describe('the vitest configuration', () => {
  it('includes handler tests written as .ts, .mts, .js and .mjs, and nothing else in handlers/', async () => {
    const root = await mkdtemp(path.join(os.tmpdir(), 'df-worker-test-discovery-'));
    tempDirs.push(root);
    await mkdir(path.join(root, 'handlers'));
    for (const name of ['a.test.ts', 'b.test.mts', 'c.test.js', 'd.test.mjs', 'd.mjs', '_e.mjs']) {
      await writeFile(path.join(root, 'handlers', name), '');
    }
    expect(await listedTestFiles(root)).toEqual([
      'handlers/a.test.ts',
      'handlers/b.test.mts',
      'handlers/c.test.js',
      'handlers/d.test.mjs',
    ]);
    expect(await listedTestFiles(root, ['handlers/d.test.mjs'])).toEqual(['handlers/d.test.mjs']);
  });
});
