import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  JsonFileError,
  readJsonFile,
  removeDurably,
  writeFileDurably,
} from '../../src/journal/durable-file.ts';

let folder: string;

beforeEach(async () => {
  folder = await mkdtemp(join(tmpdir(), 'df-worker-durable-'));
});

afterEach(async () => {
  await rm(folder, { recursive: true, force: true });
});

describe('writeFileDurably', () => {
  it('replaces the target with the new content and leaves no temp file', async () => {
    const target = join(folder, 'state.json');
    await writeFileDurably(target, '{"v":1}');
    await writeFileDurably(target, new TextEncoder().encode('{"v":2}'));
    expect(await readFile(target, 'utf8')).toBe('{"v":2}');
    expect(await readdir(folder)).toEqual(['state.json']);
  });

  it('creates the file readable by its owner only', async () => {
    const target = join(folder, 'state.json');
    await writeFileDurably(target, 'x');
    expect((await stat(target)).mode & 0o777).toBe(0o600);
  });

  it('removes its temp file when the rename fails and leaves the target as it was', async () => {
    const target = join(folder, 'occupied');
    await mkdir(target);
    await writeFile(join(target, 'inside'), 'kept');
    await expect(writeFileDurably(target, 'new')).rejects.toMatchObject({
      code: expect.any(String) as string,
    });
    expect(await readdir(folder)).toEqual(['occupied']);
    expect(await readFile(join(target, 'inside'), 'utf8')).toBe('kept');
  });

  it('rejects without creating anything when the folder does not exist', async () => {
    await expect(writeFileDurably(join(folder, 'missing', 'state.json'), 'x')).rejects.toMatchObject({
      code: 'ENOENT',
    });
    expect(await readdir(folder)).toEqual([]);
  });

  it('never leaves a partially written target when the writer is killed with SIGKILL', async () => {
    const target = join(folder, 'state.json');
    const fixture = join(import.meta.dirname, 'fixtures', 'write-loop.ts');
    for (let round = 1; round <= 5; round++) {
      const child = spawn(process.execPath, [fixture, target, `round-${round}`], {
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      // The delay only picks where in the write loop the signal lands; a plain fs.writeFile loop fails
      // this check in most rounds.
      child.stdout.once('data', () => setTimeout(() => child.kill('SIGKILL'), 2 + round * 3));
      const [code, signal] = (await once(child, 'exit')) as [number | null, NodeJS.Signals | null];
      expect({ code, signal }).toEqual({ code: null, signal: 'SIGKILL' });

      const version = JSON.parse(await readFile(target, 'utf8')) as {
        writer: string;
        n: number;
        size: number;
        payload: string;
      };
      expect(version.writer).toBe(`round-${round}`);
      expect(version.payload).toBe(String(version.n).repeat(version.size));
    }
  });
});

describe('readJsonFile', () => {
  it('returns undefined for a file that does not exist', async () => {
    expect(await readJsonFile(join(folder, 'absent.json'))).toBeUndefined();
  });

  it('returns the parsed content of a JSON file', async () => {
    await writeFile(join(folder, 'ok.json'), '{"a":[1,2]}');
    expect(await readJsonFile(join(folder, 'ok.json'))).toEqual({ a: [1, 2] });
  });

  it('rejects a truncated file with a JsonFileError naming the path', async () => {
    const path = join(folder, 'cut.json');
    await writeFile(path, '{"a":[1,');
    const error = await readJsonFile(path).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(JsonFileError);
    expect((error as JsonFileError).path).toBe(path);
    expect((error as Error).message).toContain(path);
  });
});

describe('removeDurably', () => {
  it('removes a file and accepts one that is already gone', async () => {
    const path = join(folder, 'gone.json');
    await writeFile(path, '{}');
    await removeDurably(path);
    await removeDurably(path);
    await removeDurably(join(folder, 'missing-folder', 'x.json'));
    expect(await readdir(folder)).toEqual([]);
  });
});
