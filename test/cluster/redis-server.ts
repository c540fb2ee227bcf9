// A real redis-server for the clustered tests: its own temporary folder, a free loopback port, the append-only
// file on (as the README asks of production) and no RDB snapshots. Under CI a missing redis-server fails the
// tests (.ci/run installs Debian's package); elsewhere they are skipped with a message saying what to install.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';

export const REDIS_SERVER = process.env.DF_TEST_REDIS_SERVER ?? 'redis-server';

/** True when redis-server can be started here. */
export const redisAvailable = spawnSync(REDIS_SERVER, ['--version'], { stdio: 'ignore' }).status === 0;

export const MISSING_REDIS_HINT =
  'the clustered tests need redis-server (Debian: apt-get install redis-server); .ci/run installs it';

/**
 * Whether this file's clustered tests run: without redis-server they run (and fail, naming what is missing)
 * under CI=true, and are skipped elsewhere.
 */
export const clusteredTestsRun = redisAvailable || process.env.CI === 'true';

if (!redisAvailable && !clusteredTestsRun) console.warn(`skipping: ${MISSING_REDIS_HINT}`);

export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (typeof address !== 'object' || !address) throw new Error('no port');
  return address.port;
}

export interface RedisServerOptions {
  /** More redis-server arguments (`--maxmemory-policy allkeys-lru`...); those naming a file may use `{dir}`. */
  args?: string[];
  /** Serves TLS only, on `port`, with these files (see tls-certificates.ts). */
  tls?: { certFile: string; keyFile: string; caFile: string; authClients: boolean };
}

export class RedisServer {
  readonly port: number;
  readonly dir: string;
  readonly #options: RedisServerOptions;
  #child: ChildProcess | undefined;
  #log = '';

  private constructor(port: number, dir: string, options: RedisServerOptions) {
    this.port = port;
    this.dir = dir;
    this.#options = options;
  }

  /** Starts a redis-server; throws naming what to install when it is missing. */
  static async start(options: RedisServerOptions = {}): Promise<RedisServer> {
    if (!redisAvailable) throw new Error(MISSING_REDIS_HINT);
    const dir = await mkdtemp(path.join(os.tmpdir(), 'df-worker-redis-'));
    const server = new RedisServer(await freePort(), dir, options);
    await server.restart();
    return server;
  }

  get url(): string {
    return `${this.#options.tls ? 'rediss' : 'redis'}://127.0.0.1:${this.port}`;
  }

  /** What the server wrote since it last started. */
  get log(): string {
    return this.#log;
  }

  /** The child process, for SIGSTOP and the like. */
  get pid(): number | undefined {
    return this.#child?.pid;
  }

  get running(): boolean {
    return this.#child !== undefined;
  }

  /** (Re)starts the server on the same port and folder: what the append-only file holds is loaded again. */
  async restart(): Promise<void> {
    if (this.#child) await this.stop({ kill: true });
    const tls = this.#options.tls;
    const listen = tls
      ? ['--port', '0', '--tls-port', String(this.port), '--tls-cert-file', tls.certFile]
      : ['--port', String(this.port)];
    if (tls) {
      listen.push('--tls-key-file', tls.keyFile, '--tls-ca-cert-file', tls.caFile);
      listen.push('--tls-auth-clients', tls.authClients ? 'yes' : 'no');
    }
    const child = spawn(
      REDIS_SERVER,
      [
        ...listen,
        '--bind',
        '127.0.0.1',
        '--dir',
        this.dir,
        '--appendonly',
        'yes',
        '--appendfsync',
        'everysec',
        '--save',
        '',
        '--daemonize',
        'no',
        ...(this.#options.args ?? []).map((arg) => arg.replaceAll('{dir}', this.dir)),
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    this.#child = child;
    this.#log = '';
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`redis-server did not start within 10 s:\n${this.#log}`)),
        10_000,
      );
      const onData = (data: Buffer) => {
        this.#log += data.toString();
        if (this.#log.includes('Ready to accept connections')) {
          clearTimeout(timer);
          resolve();
        }
      };
      child.stdout.on('data', onData);
      child.stderr.on('data', onData);
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`redis-server exited with ${code}:\n${this.#log}`));
      });
    });
  }

  /** SIGTERM (Redis flushes its append-only file) or, with `kill`, SIGKILL. */
  async stop(options: { kill?: boolean } = {}): Promise<void> {
    const child = this.#child;
    if (!child) return;
    this.#child = undefined;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill(options.kill ? 'SIGKILL' : 'SIGTERM');
    await exited;
  }

  async dispose(): Promise<void> {
    await this.stop();
    await rm(this.dir, { recursive: true, force: true });
  }
}
