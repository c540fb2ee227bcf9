import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, expectTypeOf, it } from 'vitest';
import { ConfigError, loadConfig, redactedConfig } from '../../src/config/index.ts';
import type { LoadConfigOptions } from '../../src/config/index.ts';

const SECRET = 'sk-live-4f9c0d2e7a1b';

let dir: string;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'df-worker-config-'));
});

afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

function configError(options: LoadConfigOptions): ConfigError {
  try {
    loadConfig({ cwd: dir, ...options });
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return error as ConfigError;
  }
  throw new Error('expected loadConfig to throw a ConfigError');
}

async function writeJson(name: string, value: unknown): Promise<string> {
  const path = join(dir, name);
  await writeFile(path, JSON.stringify(value));
  return path;
}

describe('loadConfig sources', () => {
  it.each([
    ['auto', 'auto'],
    ['AUTO', 'auto'],
    ['true', true],
    ['off', false],
  ] as const)('reads DF_LOG_PRETTY=%s as %j', (text, pretty) => {
    expect(loadConfig({ env: { DF_LOG_PRETTY: text }, cwd: dir }).log.pretty).toBe(pretty);
  });

  it('refuses DF_LOG_PRETTY that is not auto, true or false, naming it', () => {
    expect(configError({ env: { DF_LOG_PRETTY: 'colour' } }).message).toContain(
      'DF_LOG_PRETTY (log.pretty): must be auto, true or false, got "colour"',
    );
  });

  it('loads the schema defaults with no environment when nothing is required', () => {
    const config = loadConfig({ env: {}, cwd: dir });
    expect(config.concurrency).toBe(4);
    expect(config.api).toMatchObject({ url: '', key: '', authMode: 'header', pathStyle: 'auto' });
    expect(config.budget).toEqual({
      perSecond: 5,
      perMinute: 50,
      perMonth: 40_000,
      timeZone: 'UTC',
      reserve: 0.1,
      safetyMarginMs: 200,
    });
    expect(config.http).toMatchObject({ port: 9464, host: '0.0.0.0', wake: 'off' });
    expect(config.log).toEqual({ level: 'info', pretty: 'auto' });
  });

  it('types each setting from its schema entry', () => {
    const config = loadConfig({ env: {}, cwd: dir });
    expectTypeOf(config.concurrency).toEqualTypeOf<number>();
    expectTypeOf(config.tasks.sync).toEqualTypeOf<boolean>();
    expectTypeOf(config.api.authMode).toEqualTypeOf<'header' | 'query' | 'bearer'>();
    expectTypeOf(config.http.wake).toEqualTypeOf<'off' | 'token' | 'open'>();
    expectTypeOf(config.api.url).toEqualTypeOf<string>();
    expect(typeof config.concurrency).toBe('number');
  });

  it('resolves handlers.dir and state.dir against cwd', () => {
    const config = loadConfig({ env: { DF_STATE_DIR: 'var/state' }, cwd: dir });
    expect(config.handlers.dir).toBe(join(dir, 'handlers'));
    expect(config.state.dir).toBe(join(dir, 'var/state'));
  });

  it('takes each setting from its environment variable, coercing numbers and booleans', () => {
    const config = loadConfig({
      cwd: dir,
      env: {
        DF_API_URL: 'https://df.example.com/api',
        DF_CONCURRENCY: '16',
        DF_BUDGET_RESERVE: '0.25',
        DF_TASK_SYNC: 'true',
        DF_LOG_PRETTY: 'no',
        DF_JOURNAL_REPLAY: 'fail',
        DF_HTTP_PORT: '0',
      },
    });
    expect(config.api.url).toBe('https://df.example.com/api');
    expect(config.concurrency).toBe(16);
    expect(config.budget.reserve).toBe(0.25);
    expect(config.tasks.sync).toBe(true);
    expect(config.log.pretty).toBe(false);
    expect(config.journal.replay).toBe('fail');
    expect(config.http.port).toBe(0);
  });

  it('lets the DF_CONFIG file override defaults and the environment override the file', async () => {
    await writeJson('worker.json', { concurrency: 8, budget: { perMinute: 30, timeZone: 'Europe/Paris' } });
    const config = loadConfig({ cwd: dir, env: { DF_CONFIG: 'worker.json', DF_BUDGET_PER_MINUTE: '20' } });
    expect(config.concurrency).toBe(8);
    expect(config.budget.timeZone).toBe('Europe/Paris');
    expect(config.budget.perMinute).toBe(20);
    expect(config.budget.perMonth).toBe(40_000);
  });

  it('lets explicit overrides win over the environment and ignores undefined overrides', () => {
    const config = loadConfig({
      cwd: dir,
      env: { DF_CONCURRENCY: '2', DF_LOG_LEVEL: 'warn' },
      overrides: { concurrency: '12', 'log.level': undefined },
    });
    expect(config.concurrency).toBe(12);
    expect(config.log.level).toBe('warn');
  });
});

describe('loadConfig validation', () => {
  it('reports several bad settings in one ConfigError, each by env var and schema name', () => {
    const error = configError({
      env: {
        DF_CONCURRENCY: '0',
        DF_BUDGET_PER_MINUTE: 'abc',
        DF_LOG_LEVEL: 'loud',
        DF_API_URL: 'not-a-url',
      },
    });
    expect(error.problems.map((problem) => problem.env).sort()).toEqual([
      'DF_API_URL',
      'DF_BUDGET_PER_MINUTE',
      'DF_CONCURRENCY',
      'DF_LOG_LEVEL',
    ]);
    const lines = error.message.split('\n');
    expect(lines).toContain('DF_CONCURRENCY (concurrency): must be an integer between 1 and 256, got 0');
    expect(lines).toContain(
      'DF_BUDGET_PER_MINUTE (budget.perMinute): must be an integer of at least 1, got "abc"',
    );
    expect(lines.some((line) => line.startsWith('DF_LOG_LEVEL (log.level): must be one of fatal'))).toBe(
      true,
    );
    expect(
      lines.some((line) => line.startsWith('DF_API_URL (api.url):') && line.includes('"not-a-url"')),
    ).toBe(true);
  });

  it('rejects numbers with trailing text and booleans that are not true or false', () => {
    const error = configError({ env: { DF_CONCURRENCY: '12abc', DF_TASK_SYNC: 'maybe' } });
    expect(error.problems.map((problem) => problem.setting)).toEqual(['concurrency', 'tasks.sync']);
    expect(error.message).toContain('got "12abc"');
  });

  it('names both settings when budget.perSecond exceeds budget.perMinute', () => {
    const error = configError({ env: { DF_BUDGET_PER_SECOND: '60' } });
    expect(error.problems).toEqual([
      expect.objectContaining({ setting: 'budget.perSecond', env: 'DF_BUDGET_PER_SECOND' }),
    ]);
    expect(error.message).toContain('DF_BUDGET_PER_SECOND (budget.perSecond)');
    expect(error.message).toContain('DF_BUDGET_PER_MINUTE (budget.perMinute)');
  });

  it('names both settings when budget.perMinute exceeds budget.perMonth', () => {
    const error = configError({ env: { DF_BUDGET_PER_MINUTE: '100', DF_BUDGET_PER_MONTH: '99' } });
    expect(error.message).toContain('DF_BUDGET_PER_MONTH (budget.perMonth), which is 99; got 100');
  });

  it('names a time zone that Intl does not know', () => {
    const error = configError({ env: { DF_BUDGET_TIME_ZONE: 'Mars/Olympus_Mons' } });
    expect(error.problems).toEqual([
      expect.objectContaining({ setting: 'budget.timeZone', env: 'DF_BUDGET_TIME_ZONE' }),
    ]);
    expect(error.message).toContain('"Mars/Olympus_Mons"');
  });

  it('rejects a millisecond setting beyond what Node timers can wait', () => {
    const error = configError({ env: { DF_MAX_POLL_INTERVAL_MS: String(2 ** 31) } });
    expect(error.problems.map((problem) => problem.env)).toEqual(['DF_MAX_POLL_INTERVAL_MS']);
  });

  it('requires a wake token when the wake endpoint is in token mode', () => {
    const error = configError({ env: { DF_HTTP_WAKE: 'token' } });
    expect(error.problems.map((problem) => problem.env)).toEqual(['DF_HTTP_WAKE_TOKEN']);
  });

  it('keeps the probe port off by default and refuses it on DF_HTTP_PORT, naming both', () => {
    expect(loadConfig({ env: {}, cwd: dir }).http.probePort).toBe(-1);
    expect(loadConfig({ env: { DF_HTTP_PROBE_PORT: '0' }, cwd: dir }).http.probePort).toBe(0);
    const error = configError({ env: { DF_HTTP_PORT: '9465', DF_HTTP_PROBE_PORT: '9465' } });
    expect(error.problems.map((problem) => problem.env)).toEqual(['DF_HTTP_PROBE_PORT']);
    expect(error.message).toMatch(/DF_HTTP_PROBE_PORT.*must differ from DF_HTTP_PORT/);
    expect(configError({ env: { DF_HTTP_PROBE_PORT: '-2' } }).problems.map((p) => p.env)).toEqual([
      'DF_HTTP_PROBE_PORT',
    ]);
  });

  it('names an unknown key in the DF_CONFIG file together with the file', async () => {
    const path = await writeJson('worker.json', { concurrency: 2, budget: { perMinit: 10 } });
    const error = configError({ env: { DF_CONFIG: path } });
    expect(error.problems.map((problem) => problem.setting)).toEqual(['budget.perMinit']);
    expect(error.message).toContain(path);
    expect(error.message).toContain("did you mean 'budget.perMinute'? Correct its spelling");
  });

  it('attributes a bad value from the DF_CONFIG file to that file', async () => {
    const path = await writeJson('worker.json', { http: { port: 70_000 } });
    const error = configError({ env: { DF_CONFIG: path } });
    expect(error.message).toContain(
      `DF_HTTP_PORT (http.port): must be an integer between 0 and 65535, got 70000 (from the DF_CONFIG file ${path})`,
    );
  });

  it('names DF_CONFIG and the path when the file is missing', () => {
    const error = configError({ env: { DF_CONFIG: 'absent.json' } });
    expect(error.problems).toEqual([expect.objectContaining({ setting: 'DF_CONFIG' })]);
    expect(error.message).toContain(join(dir, 'absent.json'));
    expect(error.message).toContain('does not exist');
  });

  it('names DF_CONFIG and the path when the file is not JSON, without quoting its content', async () => {
    const path = join(dir, 'broken.json');
    await writeFile(path, `{"api": {"key": "${SECRET}" oops}}`);
    const error = configError({ env: { DF_CONFIG: path, DF_CONCURRENCY: '0' } });
    expect(error.problems.map((problem) => problem.setting)).toEqual(['DF_CONFIG', 'concurrency']);
    expect(error.message).toContain(`DF_CONFIG: ${path} is not valid JSON`);
    expect(error.message).not.toContain(SECRET);
  });

  it('reports a setting given an object as having the wrong type, not as missing', async () => {
    const path = await writeJson('worker.json', { api: { key: { a: 'x' } }, concurrency: { max: 3 } });
    const error = configError({ env: { DF_CONFIG: path } });
    expect(error.problems.map((problem) => problem.setting)).toEqual(['concurrency', 'api.key']);
    const lines = error.message.split('\n');
    expect(lines).toContain(
      `DF_API_KEY (api.key): must be a string, got an object (from the DF_CONFIG file ${path})`,
    );
    expect(lines).toContain(
      `DF_CONCURRENCY (concurrency): must be a number, got an object (from the DF_CONFIG file ${path})`,
    );
    expect(error.message).not.toContain('missing');
  });

  it('still blames the parent when a group of settings is given something other than an object', async () => {
    const path = await writeJson('worker.json', { log: 'debug' });
    const error = configError({ env: { DF_CONFIG: path } });
    expect(error.message).toContain(
      "DF_LOG_LEVEL (log.level): is missing because 'log' was given a value that is not an object",
    );
  });

  it('names an unknown override', () => {
    const error = configError({ env: {}, overrides: { 'concurrency.max': 3, nope: 1 } });
    expect(error.problems.map((problem) => problem.setting).sort()).toEqual(['concurrency.max', 'nope']);
  });
});

describe('loadConfig service URL', () => {
  const URL_WITH_SECRETS = 'https://user:s3cr3tPW@api.example.com/?api_key=SECRETKEY';

  it('refuses a DF_API_URL carrying credentials or a query, pointing at DF_API_KEY and masking both', () => {
    for (const require of ['none', 'service'] as const) {
      const error = configError({ env: { DF_API_URL: URL_WITH_SECRETS, DF_API_KEY: SECRET }, require });
      expect(error.problems).toEqual([expect.objectContaining({ setting: 'api.url', env: 'DF_API_URL' })]);
      expect(error.message).toContain(
        'DF_API_URL (api.url): must be the service\'s base URL without a user name, password, query or fragment (put the API key in DF_API_KEY or DF_API_KEY_FILE), got "https://[redacted]@api.example.com/?[redacted]"',
      );
      for (const secret of ['s3cr3tPW', 'SECRETKEY', 'user:', SECRET]) {
        expect(JSON.stringify(error.problems)).not.toContain(secret);
      }
    }
  });

  it.each([
    ['https://api.example.com/v1', '/v1', 'https://api.example.com'],
    ['https://api.example.com/v1/', '/v1', 'https://api.example.com'],
    ['https://api.example.com/v1/data-factory', '/v1/data-factory', 'https://api.example.com'],
    ['http://127.0.0.1:8080/proxy/v1/data_factory/', '/v1/data_factory', 'http://127.0.0.1:8080/proxy'],
    ['https://api.example.com/v2/data-factory/files', '/v2/data-factory/files', 'https://api.example.com'],
  ])('refuses a DF_API_URL ending in the API path (%s), saying what to drop', (url, suffix, fixed) => {
    const error = configError({ env: { DF_API_URL: url, DF_API_KEY: SECRET }, require: 'service' });
    expect(error.problems.map((problem) => problem.env)).toEqual(['DF_API_URL']);
    expect(error.message).toContain(
      `DF_API_URL (api.url): must not end in ${suffix}, the service's API path, which df-worker adds itself ` +
        `(the service would answer 404 for a doubled path): drop it, as in ${fixed}, got "${url}"`,
    );
  });

  it('accepts a DF_API_URL with a path prefix of its own', () => {
    for (const url of ['https://gw.example.com/df', 'https://gw.example.com/v1beta', 'https://h/v1/other']) {
      expect(loadConfig({ env: { DF_API_URL: url, DF_API_KEY: SECRET }, cwd: dir }).api.url).toBe(url);
    }
  });

  it('refuses a DF_API_URL with a bare user name or a fragment', () => {
    for (const [url, shown] of [
      ['http://token@127.0.0.1:8080/v1', 'http://[redacted]@127.0.0.1:8080/v1'],
      ['https://api.example.com/v1#key=abc', 'https://api.example.com/v1#[redacted]'],
    ]) {
      const error = configError({ env: { DF_API_URL: url } });
      expect(error.problems.map((problem) => problem.env)).toEqual(['DF_API_URL']);
      expect(error.message).toContain(`got "${shown}"`);
    }
  });

  it('masks the credentials of a URL from the DF_CONFIG file in the error', async () => {
    const path = await writeJson('worker.json', { api: { url: URL_WITH_SECRETS } });
    const error = configError({ env: { DF_CONFIG: path } });
    expect(error.message).toContain(
      `got "https://[redacted]@api.example.com/?[redacted]" (from the DF_CONFIG file ${path})`,
    );
    expect(error.message).not.toContain('s3cr3tPW');
  });

  it('masks the password and query of a URL it refuses for its scheme or shape', () => {
    const wrongScheme = configError({ env: { DF_API_URL: 'ftp://user:PASSW0RD@h/' } });
    expect(wrongScheme.message).toContain('must be an http:// or https:// URL, got "ftp://[redacted]@h/"');
    // Parses as the scheme `user:` with an opaque path, so the password sits in the "path".
    const schemeless = configError({
      env: { DF_API_URL: 'user:PASSW0RD@api.example.com/?api_key=SECRETKEY' },
    });
    expect(schemeless.message).toContain(
      'must be an http:// or https:// URL, got "[redacted]@api.example.com/?[redacted]"',
    );
    const unparsable = configError({ env: { DF_API_URL: '//user:PASSW0RD@h?api_key=SECRETKEY' } });
    expect(unparsable.message).toContain(
      'must be an absolute http:// or https:// URL, got "//[redacted]@h?[redacted]"',
    );
    for (const error of [wrongScheme, schemeless, unparsable]) {
      expect(error.message).not.toContain('PASSW0RD');
      expect(error.message).not.toContain('SECRETKEY');
    }
  });

  it('accepts a base URL with a path and a port', () => {
    const config = loadConfig({ cwd: dir, env: { DF_API_URL: 'https://api.example.com:8443/df/' } });
    expect(config.api.url).toBe('https://api.example.com:8443/df/');
  });
});

describe('loadConfig API key', () => {
  it('reads api.keyFile relative to cwd and trims it', async () => {
    await writeFile(join(dir, 'key.txt'), `  ${SECRET}\n`);
    const config = loadConfig({ cwd: dir, env: { DF_API_KEY_FILE: 'key.txt' } });
    expect(config.api.key).toBe(SECRET);
    expect(config.api.keyFile).toBe(join(dir, 'key.txt'));
  });

  it('accepts a key file ending in a Windows line break', async () => {
    await writeFile(join(dir, 'key.txt'), `${SECRET}\r\n`);
    const config = loadConfig({
      cwd: dir,
      env: { DF_API_KEY_FILE: 'key.txt' },
      require: 'service',
      overrides: { 'api.url': 'http://127.0.0.1:9' },
    });
    expect(config.api.key).toBe(SECRET);
  });

  it('rejects a key file whose key ends in a zero-width space, giving the position but not the key', async () => {
    await writeFile(join(dir, 'key.txt'), `${SECRET}\u200B\n`);
    const error = configError({ env: { DF_API_KEY_FILE: 'key.txt' } });
    expect(error.problems).toEqual([
      expect.objectContaining({ setting: 'api.keyFile', env: 'DF_API_KEY_FILE' }),
    ]);
    expect(error.message).toContain(
      `the key file ${join(dir, 'key.txt')} contains a character that is not visible ASCII (U+200B) at position ${SECRET.length + 1}`,
    );
    expect(error.message).toContain('zero-width space or a smart quote');
    expect(error.message).not.toContain(SECRET);
  });

  it('rejects a DF_API_KEY with a smart quote or a letter outside ASCII', () => {
    for (const [key, codePoint] of [
      [`\u2018${SECRET}\u2019`, 'U+2018'],
      [`${SECRET.slice(0, 4)}é${SECRET.slice(4)}`, 'U+00E9'],
    ] as const) {
      const error = configError({ env: { DF_API_KEY: key } });
      expect(error.problems.map((problem) => problem.env)).toEqual(['DF_API_KEY']);
      expect(error.message).toContain(`not visible ASCII (${codePoint})`);
      expect(error.message).not.toContain(SECRET.slice(4));
    }
  });

  it('names DF_API_KEY_FILE and the path when the key file cannot be read', () => {
    const error = configError({ env: { DF_API_KEY_FILE: 'missing-key.txt' } });
    expect(error.problems).toEqual([
      expect.objectContaining({ setting: 'api.keyFile', env: 'DF_API_KEY_FILE' }),
    ]);
    expect(error.message).toContain(join(dir, 'missing-key.txt'));
  });

  it('rejects an empty key file', async () => {
    await writeFile(join(dir, 'key.txt'), '\n');
    const error = configError({ env: { DF_API_KEY_FILE: 'key.txt' } });
    expect(error.message).toContain('is empty');
  });

  it('rejects setting both DF_API_KEY and DF_API_KEY_FILE', async () => {
    await writeFile(join(dir, 'key.txt'), SECRET);
    const error = configError({ env: { DF_API_KEY: SECRET, DF_API_KEY_FILE: 'key.txt' } });
    expect(error.message).toContain(
      'DF_API_KEY (api.key): is set together with DF_API_KEY_FILE (api.keyFile)',
    );
    expect(error.message).not.toContain(SECRET);
  });

  it('requires api.url and a key for the service, naming each', () => {
    const error = configError({ env: {}, require: 'service' });
    expect(error.problems.map((problem) => problem.env)).toEqual(['DF_API_URL', 'DF_API_KEY']);
    expect(error.message).toContain('DF_API_KEY_FILE');
  });

  it('accepts a URL and a key when the service is required', () => {
    const config = loadConfig({
      cwd: dir,
      env: { DF_API_URL: 'http://127.0.0.1:8080', DF_API_KEY: SECRET },
      require: 'service',
    });
    expect(config.api).toMatchObject({ url: 'http://127.0.0.1:8080', key: SECRET });
  });

  it('never puts the key in an error message, whatever is wrong with it', async () => {
    const withSpace = configError({ env: { DF_API_KEY: `${SECRET} x`, DF_CONCURRENCY: '0' } });
    expect(withSpace.problems.map((problem) => problem.env)).toEqual(['DF_CONCURRENCY', 'DF_API_KEY']);
    const wrongType = configError({
      env: { DF_CONFIG: await writeJson('k.json', { api: { key: 12345678 } }) },
    });
    expect(wrongType.problems.map((problem) => problem.env)).toEqual(['DF_API_KEY']);
    for (const error of [withSpace, wrongType]) {
      expect(error.message).not.toContain(SECRET);
      expect(error.message).not.toContain('12345678');
      expect(JSON.stringify(error.problems)).not.toContain(SECRET);
    }
  });

  it('never puts the key or the wake token in redactedConfig', () => {
    const config = loadConfig({
      cwd: dir,
      env: { DF_API_KEY: SECRET, DF_HTTP_WAKE: 'token', DF_HTTP_WAKE_TOKEN: 'wake-me-7d1e' },
    });
    const redacted = JSON.stringify(redactedConfig(config));
    expect(redacted).not.toContain(SECRET);
    expect(redacted).not.toContain('wake-me-7d1e');
    expect(redactedConfig(config)).toMatchObject({
      api: { key: '[redacted]' },
      http: { wakeToken: '[redacted]', wake: 'token' },
    });
    expect(config.api.key).toBe(SECRET);
  });
});
