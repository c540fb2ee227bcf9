// DF_* variables that are no setting: found with the setting they were probably meant to be, less those listed
// in DF_IGNORE_UNKNOWN; and every DF_* variable the repository's own code and scripts read is known.
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.ts';
import { listSettings } from '../../src/config/schema.ts';
import {
  findUnknownSettings,
  ignoredVariables,
  NON_SETTING_VARIABLES,
  unknownSettingWarnings,
} from '../../src/config/unknown-settings.ts';
import { REPO_ROOT } from '../cli/run-cli.ts';

describe('findUnknownSettings', () => {
  it('names each unknown DF_* variable with the setting it was meant to be, in name order', () => {
    const env = {
      DF_API_KYE: 'k',
      DF_HANDLER_TIMOUT_MS: '100',
      DF_API_URL: 'http://127.0.0.1:9',
      DF_FEATURE_FLAGS: 'x',
      PATH: '/bin',
      DF_CONFIG: 'worker.json',
    };
    expect(findUnknownSettings(env)).toEqual([
      { variable: 'DF_API_KYE', suggestion: 'DF_API_KEY' },
      { variable: 'DF_FEATURE_FLAGS' },
      { variable: 'DF_HANDLER_TIMOUT_MS', suggestion: 'DF_HANDLER_TIMEOUT_MS' },
    ]);
  });

  it('leaves out what DF_IGNORE_UNKNOWN lists, from the environment or from the DF_CONFIG file', async () => {
    const env = {
      DF_FEATURE_FLAGS: 'x',
      DF_OTHER_TOOL: 'y',
      DF_IGNORE_UNKNOWN: 'DF_FEATURE_FLAGS, DF_OTHER_TOOL',
    };
    expect(findUnknownSettings(env, ignoredVariables(env))).toEqual([]);
    expect(findUnknownSettings(env, ignoredVariables(env, loadConfig({ env })))).toEqual([]);
    const { tempDir } = await import('../cli/run-cli.ts');
    const dir = await tempDir({ 'worker.json': '{"ignoreUnknown": "DF_OTHER_TOOL"}' });
    const fromFile = { DF_CONFIG: path.join(dir, 'worker.json'), DF_OTHER_TOOL: 'y', DF_API_KYE: 'k' };
    expect(unknownSettingWarnings(fromFile, loadConfig({ env: fromFile }))).toEqual([
      'warning DFW_CONFIG_UNKNOWN_SETTING: DF_API_KYE is not a df-worker setting; did you mean DF_API_KEY?',
    ]);
  });

  it('says where to look, and how to keep a variable, when no setting is close', () => {
    expect(unknownSettingWarnings({ DF_FEATURE_FLAGS: 'x' })).toEqual([
      'warning DFW_CONFIG_UNKNOWN_SETTING: DF_FEATURE_FLAGS is not a df-worker setting (see config/README.md ' +
        'for the settings); if another tool reads it, list it in DF_IGNORE_UNKNOWN',
    ]);
  });
});

describe('the DF_* variables the repository reads', () => {
  /** Names read by code (`process.env.` then the name), shell scripts (`$` or `${`) and the chart (`name: `). */
  const READS = [/process\.env\.(DF_[A-Z0-9_]+)/g, /\$\{?(DF_[A-Z0-9_]+)/g, /name: (DF_[A-Z0-9_]+)/g];

  it('are settings, or known non-settings, so that none of them is flagged as a typo', async () => {
    const files = ['Dockerfile'];
    for (const folder of ['src', 'test', 'bench', '.ci', 'helm']) {
      const entries = await readdir(path.join(REPO_ROOT, folder), { withFileTypes: true, recursive: true });
      for (const entry of entries) {
        if (entry.isFile()) files.push(path.relative(REPO_ROOT, path.join(entry.parentPath, entry.name)));
      }
    }
    const read = new Set<string>();
    for (const file of files) {
      const text = await readFile(path.join(REPO_ROOT, file), 'utf8');
      for (const pattern of READS) for (const match of text.matchAll(pattern)) read.add(match[1]!);
    }
    expect(read.size).toBeGreaterThan(20);
    const known = new Set([
      ...listSettings().map(({ entry }) => entry.env),
      ...Object.keys(NON_SETTING_VARIABLES),
    ]);
    expect([...read].filter((name) => !known.has(name))).toEqual([]);
    expect(findUnknownSettings(Object.fromEntries([...read].map((name) => [name, 'x'])))).toEqual([]);
  });
});
