// `npm run build` starts from an empty dist/, so a module deleted or renamed in src/ cannot linger in the package.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { REPO_ROOT } from './run-cli.ts';

let work: string | undefined;
afterEach(async () => {
  if (work !== undefined) await rm(work, { recursive: true, force: true });
});

describe('npm run build', () => {
  it('removes dist/ before compiling, so no stale module from an earlier build is packed', async () => {
    const manifest = JSON.parse(await readFile(path.join(REPO_ROOT, 'package.json'), 'utf8')) as {
      scripts: Record<string, string>;
    };
    const [clean, ...rest] = manifest.scripts.build!.split(' && ');
    expect(rest.join(' && ')).toBe('tsc -p tsconfig.build.json');
    work = await mkdtemp(path.join(os.tmpdir(), 'df-worker-build-'));
    await mkdir(path.join(work, 'dist', 'removed-module'), { recursive: true });
    await writeFile(path.join(work, 'dist', 'removed-module', 'index.js'), 'export {};\n');
    await writeFile(path.join(work, 'keep.txt'), 'not dist\n');
    execFileSync('sh', ['-c', clean!], {
      cwd: work,
      env: {
        ...process.env,
        PATH: `${path.dirname(process.execPath)}${path.delimiter}${process.env.PATH ?? ''}`,
      },
    });
    expect(existsSync(path.join(work, 'dist'))).toBe(false);
    expect(existsSync(path.join(work, 'keep.txt'))).toBe(true);
    // Running it again on a tree without dist/ (a fresh clone) must not fail.
    execFileSync('sh', ['-c', clean!], { cwd: work });
  });
});
