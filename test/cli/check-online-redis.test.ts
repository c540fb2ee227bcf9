// `df-worker check --online` with DF_REDIS_URL: it tries Redis too (PING, then INFO), and a Redis that
// clustered mode cannot use (a refused password, an evicting policy) is a problem: exit 1, saying what Redis said.
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Emulator } from '../../src/emulator/index.ts';
import { clusteredTestsRun, RedisServer } from '../cluster/redis-server.ts';
import { cli, tempDir } from './run-cli.ts';

const KEY = 'check-online-redis-key-5c1e';

describe.runIf(clusteredTestsRun)('df-worker check --online with DF_REDIS_URL', () => {
  let emulator: Emulator;
  let dir: string;
  let redis: RedisServer;
  let evicting: RedisServer;

  beforeAll(async () => {
    emulator = new Emulator({ apiKeys: [KEY] });
    await emulator.listen();
    dir = await tempDir({ 'handlers/good.mjs': `export default { key: 'good', handle: () => ({}) };\n` });
    emulator.createTask({ key: 'good' });
    [redis, evicting] = await Promise.all([
      RedisServer.start({ args: ['--requirepass', 'redis-secret-7a'] }),
      RedisServer.start({ args: ['--maxmemory-policy', 'allkeys-lru'] }),
    ]);
  });
  afterAll(async () => {
    await emulator?.close();
    await redis?.dispose();
    await evicting?.dispose();
  });

  const env = (redisUrl: string) => ({
    DF_API_URL: emulator.url,
    DF_API_KEY: KEY,
    DF_HANDLERS_DIR: path.join(dir, 'handlers'),
    DF_STATE_DIR: path.join(dir, 'state'),
    DF_REDIS_URL: redisUrl,
  });

  it('reports that Redis answered, with its version, role and policy; exit 0', async () => {
    const result = await cli(['check', '--online'], env(`redis://:redis-secret-7a@127.0.0.1:${redis.port}`));
    expect(result.stdout).toMatch(
      new RegExp(
        `^redis: redis://\\[redacted\\]@127\\.0\\.0\\.1:${redis.port} answered PING \\(Redis \\d+\\.\\d+\\.\\d+, role master, maxmemory-policy noeviction\\)$`,
        'm',
      ),
    );
    expect(result.code).toBe(0);
    expect(result.stdout).not.toContain('redis-secret-7a');
  });

  it('a wrong password: says what Redis said, never the password; exit 1', async () => {
    const result = await cli(['check', '--online'], env(`redis://:not-it-3f@127.0.0.1:${redis.port}`));
    expect(result.code).toBe(1);
    expect(result.stdout).toMatch(
      /^redis: redis:\/\/\[redacted\]@127\.0\.0\.1:\d+: Redis refused the credentials \(WRONGPASS .*DF_REDIS_URL$/m,
    );
    expect(result.stdout).not.toContain('not-it-3f');
  });

  it('maxmemory-policy allkeys-lru: a problem naming the policy; exit 1', async () => {
    const result = await cli(['check', '--online'], env(evicting.url));
    expect(result.code).toBe(1);
    expect(result.stdout).toContain('maxmemory-policy allkeys-lru)\n');
    expect(result.stdout).toContain(
      "redis: Redis's maxmemory-policy is allkeys-lru: when full it would evict the queue's jobs and the budget's windows; set maxmemory-policy noeviction\n",
    );
  });
});
