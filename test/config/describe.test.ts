import { describe, expect, it } from 'vitest';
import { redactUrl } from '../../src/secrets/redact.ts';
import { describeConfig, loadConfig, redactedConfig } from '../../src/config/index.ts';

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

describe('redactUrl', () => {
  it('masks the credentials, query and fragment of a URL and keeps the rest', () => {
    expect(redactUrl('https://user:s3cr3tPW@api.example.com/?api_key=SECRETKEY')).toBe(
      'https://[redacted]@api.example.com/?[redacted]',
    );
    expect(redactUrl('http://127.0.0.1:8080/v1#token')).toBe('http://127.0.0.1:8080/v1#[redacted]');
    expect(redactUrl('https://api.example.com/df')).toBe('https://api.example.com/df');
  });

  it('masks what looks like credentials or a query in text that is not a URL', () => {
    expect(redactUrl('//user:pw@host/x?key=abc')).toBe('//[redacted]@host/x?[redacted]');
    expect(redactUrl('not a url')).toBe('not a url');
  });
});

describe('redactedConfig', () => {
  it('masks the credentials and query of api.url', () => {
    const config = loadConfig({ env: {}, cwd: '/' });
    const withSecrets = { ...config, api: { ...config.api, url: 'https://u:pw@h.example/?api_key=k1' } };
    expect(redactedConfig(withSecrets)).toMatchObject({
      api: { url: 'https://[redacted]@h.example/?[redacted]' },
    });
    expect(withSecrets.api.url).toBe('https://u:pw@h.example/?api_key=k1');
  });
});
