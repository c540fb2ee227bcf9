// Clustered mode's Redis settings: Redis Sentinel (the sentinels, the master's name, their password, a secret)
// and TLS files; what only makes sense together is refused together, and the connection options follow them.
import { mkdtemp, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { connectionOptions } from '../../src/clustered/redis.ts';
import { ConfigError, loadConfig, redactedConfig } from '../../src/config/index.ts';
import { SECRET_VARIABLES } from '../../src/config/secret-settings.ts';
import { createLogger } from '../../src/telemetry/logger.ts';

function problemsOf(env: Record<string, string>): string {
  try {
    loadConfig({ env });
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as Error).message;
  }
  throw new Error('loadConfig accepted it');
}

const SENTINELS = {
  DF_REDIS_URL: 'redis://:master-pass@mymaster/2',
  DF_REDIS_SENTINELS: 'sentinel-0:26380, sentinel-1, [::1]:26381',
  DF_REDIS_SENTINEL_MASTER: 'orders',
  DF_REDIS_SENTINEL_PASSWORD: 'sentinel-secret-91',
};

describe('Redis Sentinel settings', () => {
  it('connect through the sentinels (26379 when no port is given) to the named master, with its password and db', () => {
    const config = loadConfig({ env: SENTINELS });
    expect(connectionOptions(config.cluster)).toMatchObject({
      sentinels: [
        { host: 'sentinel-0', port: 26_380 },
        { host: 'sentinel-1', port: 26_379 },
        { host: '::1', port: 26_381 },
      ],
      name: 'orders',
      sentinelPassword: 'sentinel-secret-91',
      password: 'master-pass',
      db: 2,
    });
    expect(connectionOptions(config.cluster)).not.toHaveProperty('host');
  });

  it('the sentinel password is a secret: redacted in the printed configuration and the logs, kept from handlers', () => {
    const config = loadConfig({ env: SENTINELS });
    expect(JSON.stringify(redactedConfig(config))).not.toContain('sentinel-secret-91');
    let out = '';
    const logger = createLogger({
      level: 'info',
      destination: { write: (line: string) => (out += line) },
    });
    logger.info({ config }, 'configuration');
    logger.flush();
    expect(out).toContain('"sentinelPassword":"[redacted]"');
    expect(out).not.toContain('sentinel-secret-91');
    expect(SECRET_VARIABLES).toContain('DF_REDIS_SENTINEL_PASSWORD');
  });

  it('refuses a malformed list, and sentinels without DF_REDIS_URL', () => {
    expect(problemsOf({ DF_REDIS_URL: 'redis://m', DF_REDIS_SENTINELS: 'a:26379,b:notaport' })).toContain(
      'DF_REDIS_SENTINELS (cluster.sentinels): must be a comma-separated list of host:port such as sentinel-0:26379,sentinel-1:26379; "b:notaport" is not one',
    );
    expect(problemsOf({ DF_REDIS_SENTINELS: 'a:26379' })).toContain(
      'DF_REDIS_SENTINELS (cluster.sentinels): needs DF_REDIS_URL (cluster.redisUrl) for the password and database of the master',
    );
  });
});

describe('Redis TLS files', () => {
  it('are read for rediss:// (paths relative to the working directory) and given to the connection', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'df-worker-tls-settings-'));
    await writeFile(path.join(dir, 'ca.pem'), 'the-ca');
    await writeFile(path.join(dir, 'client.pem'), 'the-cert');
    await writeFile(path.join(dir, 'client.key'), 'the-key');
    const config = loadConfig({
      cwd: dir,
      env: {
        DF_REDIS_URL: 'rediss://redis:6380',
        DF_REDIS_TLS_CA_FILE: 'ca.pem',
        DF_REDIS_TLS_CERT_FILE: 'client.pem',
        DF_REDIS_TLS_KEY_FILE: 'client.key',
      },
    });
    expect(config.cluster.tlsCaFile).toBe(path.join(dir, 'ca.pem'));
    const { tls } = connectionOptions(config.cluster) as { tls: Record<string, Buffer> };
    expect([tls.ca, tls.cert, tls.key].map(String)).toEqual(['the-ca', 'the-cert', 'the-key']);
  });

  it('a missing file is named with its setting when the connection is made', () => {
    const config = loadConfig({
      env: { DF_REDIS_URL: 'rediss://redis', DF_REDIS_TLS_CA_FILE: '/nonexistent/ca.pem' },
    });
    expect(() => connectionOptions(config.cluster)).toThrow(
      "cannot read DF_REDIS_TLS_CA_FILE /nonexistent/ca.pem (ENOENT); check the path and the file's permissions",
    );
  });

  it('are refused with a redis:// URL, and a certificate without its key', () => {
    expect(problemsOf({ DF_REDIS_URL: 'redis://redis', DF_REDIS_TLS_CA_FILE: 'ca.pem' })).toContain(
      'DF_REDIS_TLS_CA_FILE (cluster.tlsCaFile): is used only over TLS; give DF_REDIS_URL (cluster.redisUrl) as a rediss:// URL, or unset it',
    );
    expect(problemsOf({ DF_REDIS_URL: 'rediss://redis', DF_REDIS_TLS_CERT_FILE: 'c.pem' })).toContain(
      'DF_REDIS_TLS_KEY_FILE (cluster.tlsKeyFile): must be set together with DF_REDIS_TLS_CERT_FILE (cluster.tlsCertFile): a client certificate needs its key',
    );
  });
});
