import { describe, expect, it } from 'vitest';
import { describeConfig, loadConfig } from '../../src/config/index.ts';

function valueAt(root: unknown, setting: string): unknown {
  return setting.split('.').reduce<unknown>((node, name) => (node as Record<string, unknown>)[name], root);
}

describe('describeConfig', () => {
  const settings = describeConfig();

  it('gives every setting a distinct DF_ environment variable', () => {
    expect(settings.length).toBeGreaterThan(30);
    for (const { env } of settings) expect(env).toMatch(/^DF_[A-Z0-9_]+$/);
    expect(new Set(settings.map(({ env }) => env)).size).toBe(settings.length);
  });

  it('documents every setting, including its default', () => {
    for (const { setting, doc } of settings) {
      expect(doc.length, setting).toBeGreaterThan(30);
      expect(doc, setting).toContain('Default:');
    }
  });

  it('states the unit of every millisecond setting', () => {
    for (const { setting, doc } of settings.filter(({ setting }) => setting.endsWith('Ms'))) {
      expect(doc, setting).toContain('milliseconds');
    }
  });

  it('lists the defaults that loadConfig applies when nothing is set', () => {
    const config = loadConfig({ env: {}, cwd: '/' });
    for (const { setting, default: value } of settings) {
      if (setting.endsWith('.dir')) continue; // resolved against cwd
      expect(valueAt(config, setting), setting).toEqual(value);
    }
  });
});
