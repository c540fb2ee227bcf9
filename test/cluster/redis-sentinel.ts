// A Redis Sentinel set-up for the failover tests: a master and its replica (real redis-servers) watched by real
// redis-sentinel processes with a short down-after-milliseconds, each on a free loopback port. .ci/run installs
// Debian's redis-sentinel; elsewhere the tests are skipped without it (as without redis-server).
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { freePort, redisAvailable, RedisServer } from './redis-server.ts';

export const REDIS_SENTINEL = process.env.DF_TEST_REDIS_SENTINEL ?? 'redis-sentinel';

export const sentinelAvailable =
  redisAvailable && spawnSync(REDIS_SENTINEL, ['--version'], { stdio: 'ignore' }).status === 0;

/** Whether the sentinel tests run: under CI=true always (failing without redis-sentinel), elsewhere if installed. */
export const sentinelTestsRun = sentinelAvailable || process.env.CI === 'true';

if (!sentinelTestsRun) {
  console.warn('skipping: the failover tests need redis-sentinel (Debian: apt-get install redis-sentinel)');
}

export const MASTER_NAME = 'mymaster';

interface Sentinel {
  port: number;
  child: ChildProcess;
  log: () => string;
}

export class SentinelSet {
  readonly master: RedisServer;
  readonly replica: RedisServer;
  readonly #sentinels: Sentinel[];
  readonly #dir: string;

  private constructor(master: RedisServer, replica: RedisServer, sentinels: Sentinel[], dir: string) {
    this.master = master;
    this.replica = replica;
    this.#sentinels = sentinels;
    this.#dir = dir;
  }

  /**
   * A master, a replica of it, and `count` sentinels (quorum: a majority) that declare the master down after
   * `downAfterMs` of silence; resolves once every sentinel knows the replica and the other sentinels.
   */
  static async start(options: { count?: number; downAfterMs?: number } = {}): Promise<SentinelSet> {
    const count = options.count ?? 3;
    // A replica's first full sync starts at once, not after the default 5 s wait for more replicas.
    const master = await RedisServer.start({ args: ['--repl-diskless-sync-delay', '0'] });
    const replica = await RedisServer.start({ args: ['--replicaof', '127.0.0.1', String(master.port)] });
    const dir = await mkdtemp(path.join(os.tmpdir(), 'df-worker-sentinel-'));
    const sentinels: Sentinel[] = [];
    for (let i = 0; i < count; i++) {
      const port = await freePort();
      const file = path.join(dir, `sentinel-${i}.conf`);
      await writeFile(
        file,
        [
          `port ${port}`,
          'bind 127.0.0.1',
          `dir ${dir}`,
          `sentinel monitor ${MASTER_NAME} 127.0.0.1 ${master.port} ${Math.floor(count / 2) + 1}`,
          `sentinel down-after-milliseconds ${MASTER_NAME} ${options.downAfterMs ?? 1_000}`,
          `sentinel failover-timeout ${MASTER_NAME} 10000`,
          '',
        ].join('\n'),
      );
      const child = spawn(REDIS_SENTINEL, [file], { stdio: ['ignore', 'pipe', 'pipe'] });
      let log = '';
      child.stdout.on('data', (data: Buffer) => (log += data.toString()));
      child.stderr.on('data', (data: Buffer) => (log += data.toString()));
      sentinels.push({ port, child, log: () => log });
    }
    const set = new SentinelSet(master, replica, sentinels, dir);
    await set.#until(
      () =>
        replica.log.includes('MASTER <-> REPLICA sync: Finished with success') &&
        sentinels.every(
          (s) => s.log().includes('+slave slave') && countOf(s.log(), '+sentinel sentinel') >= count - 1,
        ),
      'the replica in sync, and every sentinel to know it and the other sentinels',
      30_000,
    );
    return set;
  }

  /** DF_REDIS_SENTINELS for them. */
  get addresses(): string {
    return this.#sentinels.map((s) => `127.0.0.1:${s.port}`).join(',');
  }

  /** Resolves with the instant (ms) the sentinels announce a new master (+switch-master), and its port. */
  async nextSwitch(): Promise<{ at: number; port: number }> {
    const subscriber = new Redis({ host: '127.0.0.1', port: this.#sentinels[0]!.port });
    await subscriber.subscribe('+switch-master');
    try {
      return await new Promise((resolve) =>
        subscriber.on('message', (_channel: string, message: string) =>
          resolve({ at: Date.now(), port: Number(message.split(' ').at(-1)) }),
        ),
      );
    } finally {
      subscriber.disconnect();
    }
  }

  async #until(condition: () => boolean, what: string, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!condition()) {
      if (Date.now() > deadline) {
        const logs = this.#sentinels.map((s) => s.log()).join('\n---\n');
        throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}:\n${logs}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  async dispose(): Promise<void> {
    await Promise.all(
      this.#sentinels.map(async ({ child }) => {
        if (child.exitCode !== null || child.signalCode !== null) return;
        const exited = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGKILL');
        await exited;
      }),
    );
    await this.master.dispose();
    await this.replica.dispose();
    await rm(this.#dir, { recursive: true, force: true });
  }
}

function countOf(text: string, needle: string): number {
  return text.split(needle).length - 1;
}
