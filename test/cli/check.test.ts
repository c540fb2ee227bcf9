// `df-worker check`: every configuration problem and every broken handler listed, exit 1 when any, and the
// API key never printed.
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { checkConfig, checkHandlers } from '../../src/cli/commands/check.ts';
import { cli, tempDir } from './run-cli.ts';

const SECRET = 'check-secret-key-4f9a2c7e';
const GOOD_HANDLER = `export default { key: 'good', inputKeys: ['a'], handle: () => ({}) };\n`;

describe('checkConfig', () => {
  it('requires what `start` requires once a service URL is set, in the environment or in DF_CONFIG', async () => {
    const dir = await tempDir({ 'config.json': '{"api": {"url": "http://127.0.0.1:9"}}' });
    const fromEnv = checkConfig({ DF_API_URL: 'http://127.0.0.1:9' });
    const fromFile = checkConfig({ DF_CONFIG: path.join(dir, 'config.json') });
    for (const result of [fromEnv, fromFile]) {
      expect(result.config).toBeUndefined();
      expect(result.problems.map((p) => p.setting)).toEqual(['api.key']);
    }
  });

  it('needs no URL or key when no service URL is set', () => {
    const result = checkConfig({});
    expect(result.problems).toEqual([]);
    expect(result.config?.api.url).toBe('');
  });
});

describe('checkHandlers', () => {
  it('reports a missing handlers folder as one problem', async () => {
    const dir = path.join(await tempDir(), 'missing');
    const result = await checkHandlers(dir);
    expect(result.problems).toBe(1);
    expect(result.lines[1]).toContain(`handlers directory "${dir}" does not exist`);
  });
});

describe('df-worker check', () => {
  it('exits 0 for a good configuration and handlers, printing the configuration redacted on --verbose', async () => {
    const dir = await tempDir({ 'good.mjs': GOOD_HANDLER });
    const result = await cli(['check', '--verbose'], {
      DF_HANDLERS_DIR: dir,
      DF_API_URL: 'http://127.0.0.1:9',
      DF_API_KEY: SECRET,
    });
    expect(result).toMatchObject({ code: 0, stderr: '' });
    expect(result.stdout).toMatch(/^config: ok \(service URL and API key set\)$/m);
    expect(result.stdout).toMatch(/^ {4}"key": "\[redacted\]",$/m);
    expect(result.stdout).toContain(`handlers: 1 loaded from ${dir} (good)\n`);
    expect(result.stdout).not.toContain(SECRET);
  });

  it('exits 1 naming each handler file that fails to load', async () => {
    const dir = await tempDir({
      'good.mjs': GOOD_HANDLER,
      'broken.ts': 'export default {\n',
      'empty.mjs': 'export const x = 1;\n',
    });
    const result = await cli(['check', '--dir', dir]);
    expect(result.code).toBe(1);
    expect(result.stdout).toContain(`handlers: 1 loaded from ${dir} (good); 2 failed\n`);
    expect(result.stdout).toContain(`  ${path.join(dir, 'broken.ts')}: syntax error`);
    expect(result.stdout).toContain(`  ${path.join(dir, 'empty.mjs')}: has no default export`);
    expect(result.stdout).toMatch(/^check failed: 2 problems/m);
  });

  it('exits 1 naming every bad setting, and never prints the key', async () => {
    const dir = await tempDir({ 'good.mjs': GOOD_HANDLER });
    await writeFile(path.join(dir, 'key.txt'), `${SECRET}\n`);
    const result = await cli(['check', '--verbose'], {
      DF_HANDLERS_DIR: dir,
      DF_API_URL: 'http://127.0.0.1:9',
      DF_API_KEY: SECRET,
      DF_API_KEY_FILE: path.join(dir, 'key.txt'),
      DF_CONCURRENCY: '0',
    });
    expect(result.code).toBe(1);
    expect(result.stdout).toMatch(/^config: 2 problems$/m);
    expect(result.stdout).toMatch(/^ {2}DF_CONCURRENCY \(concurrency\): /m);
    expect(result.stdout).toMatch(/^ {2}DF_API_KEY \(api.key\): is set together with DF_API_KEY_FILE/m);
    expect(result.stdout).toContain('handlers: 1 loaded');
    expect(result.stdout + result.stderr).not.toContain(SECRET);
  });

  it('exits 1 naming each DF_* variable that is no setting with the setting it was meant to be', async () => {
    const dir = await tempDir({ 'good.mjs': GOOD_HANDLER });
    const result = await cli(['check'], {
      DF_HANDLERS_DIR: dir,
      DF_API_URL: 'http://127.0.0.1:9',
      DF_API_KEY: SECRET,
      DF_API_KYE: SECRET,
      DF_HANDLER_TIMOUT_MS: '100',
    });
    expect(result.code).toBe(1);
    expect(result.stdout).toMatch(/^config: ok /m);
    expect(result.stdout).toContain(
      'settings: 2 unknown DF_* variables (correct them, list those another tool reads in DF_IGNORE_UNKNOWN, ' +
        'or pass --allow-unknown-settings)\n' +
        '  error DFW_CONFIG_UNKNOWN_SETTING: DF_API_KYE is not a df-worker setting; did you mean DF_API_KEY?\n' +
        '  error DFW_CONFIG_UNKNOWN_SETTING: DF_HANDLER_TIMOUT_MS is not a df-worker setting; ' +
        'did you mean DF_HANDLER_TIMEOUT_MS?\n',
    );
    expect(result.stdout).toMatch(/^check failed: 2 problems/m);
    expect(result.stdout + result.stderr).not.toContain(SECRET);
  });

  it('only warns about them with --allow-unknown-settings, and says nothing of those DF_IGNORE_UNKNOWN lists', async () => {
    const dir = await tempDir({ 'good.mjs': GOOD_HANDLER });
    const env = {
      DF_HANDLERS_DIR: dir,
      DF_API_KYE: 'k',
      DF_OTHER_TOOL: 'x',
      DF_IGNORE_UNKNOWN: 'DF_OTHER_TOOL',
    };
    const allowed = await cli(['check', '--allow-unknown-settings'], env);
    expect(allowed.code).toBe(0);
    expect(allowed.stdout).toContain(
      'settings: 1 unknown DF_* variable (allowed by --allow-unknown-settings)\n' +
        '  warning DFW_CONFIG_UNKNOWN_SETTING: DF_API_KYE is not a df-worker setting; did you mean DF_API_KEY?\n',
    );
    expect(allowed.stdout).not.toContain('DF_OTHER_TOOL is');
    expect(allowed.stdout).not.toContain('check failed');
  });

  it('names an unknown key of the DF_CONFIG file with the setting it was meant to be', async () => {
    const dir = await tempDir({ 'good.mjs': GOOD_HANDLER, 'worker.json': '{"handlers": {"timoutMs": 100}}' });
    const result = await cli(['check', '--config', path.join(dir, 'worker.json')], { DF_HANDLERS_DIR: dir });
    expect(result.code).toBe(1);
    expect(result.stdout).toContain(
      `  handlers.timoutMs: is not a setting df-worker knows (from the DF_CONFIG file ${path.join(dir, 'worker.json')}); ` +
        "did you mean 'handlers.timeoutMs'? Correct its spelling\n",
    );
  });
});
