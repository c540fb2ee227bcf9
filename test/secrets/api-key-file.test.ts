// DF_API_KEY_FILE kept current on real files: the three ways a key is replaced (a Kubernetes Secret's `..data`
// symlink swapped, a file renamed over the old one, the file written in place), a read after a 401, and a file
// that holds no key leaving the key in use as it is.
import { mkdir, mkdtemp, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { loadConfig } from '../../src/config/load.ts';
import { sandboxFromConfig } from '../../src/sandbox/index.ts';
import { WorkerEvents } from '../../src/events/worker-events.ts';
import { ApiKeyFile, type KeyFileReadResult } from '../../src/secrets/api-key-file.ts';
import { waitFor } from '../daemon/harness.ts';

let dir: string;
let file: ApiKeyFile | undefined;
afterEach(async () => {
  file?.close();
  file = undefined;
  await rm(dir, { recursive: true, force: true });
});

async function watched(keyPath: string, initial: string, statEveryMs = 100_000, watch = true) {
  const reads: { result: KeyFileReadResult; trigger: string }[] = [];
  const events = new WorkerEvents();
  events.on('apiKeyFile', ({ result, trigger }) => reads.push({ result, trigger }));
  file = new ApiKeyFile({
    path: keyPath,
    initial,
    statEveryMs,
    watch,
    events,
  });
  await file.start();
  return { file, reads };
}

describe('ApiKeyFile', () => {
  it("takes a Kubernetes Secret's new key when the kubelet swaps the ..data symlink", async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'df-key-'));
    // The kubelet's layout: key -> ..data/key, ..data -> ..<timestamp>/
    await mkdir(path.join(dir, '..2026_12_01_a'));
    await writeFile(path.join(dir, '..2026_12_01_a/key'), 'key-one\n');
    await symlink('..2026_12_01_a', path.join(dir, '..data'));
    await symlink('..data/key', path.join(dir, 'key'));
    const { file: keys, reads } = await watched(path.join(dir, 'key'), 'key-one');

    await mkdir(path.join(dir, '..2026_12_01_b'));
    await writeFile(path.join(dir, '..2026_12_01_b/key'), 'key-two\n');
    await symlink('..2026_12_01_b', path.join(dir, '..data_tmp'));
    await rename(path.join(dir, '..data_tmp'), path.join(dir, '..data'));
    await waitFor(() => keys.current() === 'key-two', 'the swapped key', 5_000);
    expect(reads.some((r) => r.result === 'changed')).toBe(true);
    expect(keys.held()).toEqual(['key-one', 'key-two']);
  });

  it('takes a file renamed over the old one, and one written in place', async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'df-key-'));
    const keyPath = path.join(dir, 'api-key');
    await writeFile(keyPath, 'key-one');
    const { file: keys } = await watched(keyPath, 'key-one');
    await writeFile(path.join(dir, 'api-key.new'), 'key-two\n');
    await rename(path.join(dir, 'api-key.new'), keyPath);
    await waitFor(() => keys.current() === 'key-two', 'the renamed key', 5_000);
    await writeFile(keyPath, 'key-three');
    await waitFor(() => keys.current() === 'key-three', 'the key written in place', 5_000);
  });

  it('finds a change by its periodic stat where no notification comes', async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'df-key-'));
    const keyPath = path.join(dir, 'api-key');
    await writeFile(keyPath, 'key-one');
    const { file: keys, reads } = await watched(keyPath, 'key-one', 50, false);
    await writeFile(keyPath, 'key-two');
    await waitFor(() => keys.current() === 'key-two', 'the key found by stat', 5_000);
    expect(reads.filter((r) => r.result === 'changed')).toHaveLength(1);
  });

  it('reads again after a 401, and keeps the key in use when the file holds none', async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'df-key-'));
    const keyPath = path.join(dir, 'api-key');
    await writeFile(keyPath, 'key-one');
    const { file: keys } = await watched(keyPath, 'key-one');
    expect(await keys.reload()).toBe('unchanged');
    await rm(keyPath);
    expect(await keys.reload()).toBe('unreadable');
    await writeFile(keyPath, 'two words');
    expect(await keys.reload()).toBe('unreadable');
    expect(keys.current()).toBe('key-one');
    await writeFile(keyPath, 'key-two');
    expect(await keys.reload()).toBe('changed');
    expect(keys.current()).toBe('key-two');
  });
});

describe('a key taken while the daemon runs', () => {
  it('is redacted from what handlers return, throw or log, as the key of start is', async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'df-key-'));
    const keyPath = path.join(dir, 'api-key');
    await writeFile(keyPath, 'key-of-start');
    const config = loadConfig({
      env: {},
      overrides: { 'api.url': 'http://127.0.0.1:1', 'api.key': 'key-of-start', 'handlers.isolation': 'none' },
    });
    const { file: keys } = await watched(keyPath, 'key-of-start');
    const sandbox = sandboxFromConfig(config, pino({ level: 'silent' }), { laterSecrets: () => keys.held() });
    await writeFile(keyPath, 'key-rotated-in');
    expect(await keys.reload()).toBe('changed');
    const said = sandbox.redact('old key-of-start, new key-rotated-in');
    expect(said).not.toContain('key-of-start');
    expect(said).not.toContain('key-rotated-in');
  });
});
