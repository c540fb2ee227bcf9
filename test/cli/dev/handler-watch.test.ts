// The dev session's watch on the handlers folder, on real files: one call per settled edit, helper modules in
// subfolders included, tests and editor leftovers ignored.
import { mkdir, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { HandlerWatch, isCodeFile } from '../../../src/cli/dev/handler-watch.ts';
import { waitFor } from '../../daemon/harness.ts';
import { tempDir } from '../run-cli.ts';

let watch: HandlerWatch | undefined;
afterEach(() => {
  watch?.close();
  watch = undefined;
});

async function watched(dir: string): Promise<string[][]> {
  const calls: string[][] = [];
  watch = new HandlerWatch({
    dir,
    debounceMs: 100,
    onChange: (files) => {
      calls.push(files);
      return Promise.resolve();
    },
    onError: (error) => {
      throw error;
    },
  });
  await watch.ready();
  return calls;
}

describe('HandlerWatch', () => {
  it('calls back once for a burst of writes, with the file changed', async () => {
    const dir = await tempDir({ 'greet.ts': 'v1' });
    const calls = await watched(dir);
    for (const version of ['v2', 'v3', 'v4']) await writeFile(path.join(dir, 'greet.ts'), version);
    await waitFor(() => calls.length > 0, 'the change', 5_000);
    // A later edit of another file is the next call, alone: no straggler of the burst came between or with it.
    await writeFile(path.join(dir, 'other.ts'), 'v1');
    await waitFor(() => calls.length > 1, 'the next change', 5_000);
    expect(calls).toEqual([['greet.ts'], ['other.ts']]);
  });

  it('sees a save by rename, a helper in a subfolder (also one made later), and ignores tests and swap files', async () => {
    const dir = await tempDir({ 'greet.ts': 'v1', 'lib/format.ts': 'v1' });
    const calls = await watched(dir);
    await writeFile(path.join(dir, 'greet.test.ts'), 'test');
    await writeFile(path.join(dir, '.greet.ts.swp'), 'v2');
    // The save by rename is the first call, and names greet.ts alone: the test and the swap file made none.
    await rename(path.join(dir, '.greet.ts.swp'), path.join(dir, 'greet.ts'));
    await waitFor(() => calls.length === 1, 'the rename', 5_000);
    await writeFile(path.join(dir, 'lib/format.ts'), 'v2');
    await waitFor(() => calls.length === 2, 'the helper edit', 5_000);
    await mkdir(path.join(dir, 'lib/deeper'));
    await writeFile(path.join(dir, 'lib/deeper/more.ts'), 'v1');
    const more = path.join('lib', 'deeper', 'more.ts');
    await waitFor(() => calls.some((files) => files.includes(more)), 'a file in a new folder', 5_000);
    expect(calls.slice(0, 2)).toEqual([['greet.ts'], [path.join('lib', 'format.ts')]]);
  });

  it('tells code files from the rest', () => {
    expect(['a.ts', 'a.mts', 'b.js', 'c.mjs', 'lib/x.cjs', 'data.json'].filter(isCodeFile)).toHaveLength(6);
    expect(
      [
        'a.test.ts',
        'a.spec.js',
        '.a.ts.swp',
        'a.ts~',
        '.hidden.ts',
        'node_modules/x/index.js',
        'README.md',
      ].filter(isCodeFile),
    ).toEqual([]);
  });
});
