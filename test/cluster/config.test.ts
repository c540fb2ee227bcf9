// DF_REDIS_URL: unset is standalone mode; set, it must be a redis:// URL, and its password never shows.
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig, redactedConfig } from '../../src/config/index.ts';

describe('DF_REDIS_URL', () => {
  it('is empty by default: standalone mode', () => {
    expect(loadConfig({ env: {} }).cluster).toMatchObject({ redisUrl: '', sentinels: '', replicaId: '' });
  });

  it("is shown with its password masked, in the redacted configuration and in a setting's error", () => {
    const config = loadConfig({ env: { DF_REDIS_URL: 'redis://:s3cret@redis:6379/2' } });
    expect(config.cluster.redisUrl).toBe('redis://:s3cret@redis:6379/2');
    expect(JSON.stringify(redactedConfig(config))).not.toContain('s3cret');
    expect(JSON.stringify(redactedConfig(config))).toContain('redis://[redacted]@redis:6379/2');
    let error: unknown;
    try {
      loadConfig({ env: { DF_REDIS_URL: 'http://user:s3cret@redis:6379' } });
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as Error).message).toContain('DF_REDIS_URL');
    expect((error as Error).message).toContain('redis:// or rediss://');
    expect((error as Error).message).not.toContain('s3cret');
  });
});
