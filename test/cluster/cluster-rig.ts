// Three (or more) real `df-worker start` processes in clustered mode on one emulator key and one redis-server,
// and the figures the clustered tests check and print: claimed, reported, duplicated, lost, 429s, and the most
// requests the emulator saw in any second and any minute.
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll } from 'vitest';
import { clusterKeys } from '../../src/clustered/redis.ts';
import { Emulator } from '../../src/emulator/index.ts';
import { runCli, type CliProcess } from '../cli/process.ts';
import { waitFor } from '../daemon/harness.ts';
import { RedisServer } from './redis-server.ts';

export const TASKS = ['alpha', 'beta', 'gamma'] as const;

/** A month large enough that its pacing never slows these short runs: the windows are what is tested. */
const PER_MONTH = 10_000_000;

/** Handlers sleep `ms` of their input (default 20 ms), so a test can keep one running while it kills its replica. */
function handlerSource(key: string): string {
  return `import { defineTask } from 'df-worker';
export default defineTask({
  key: '${key}',
  inputKeys: ['n', 'ms'],
  outputKeys: ['n'],
  handle: async (input: { n: number; ms?: number }) => {
    await new Promise((resolve) => setTimeout(resolve, input.ms ?? 20));
    return { n: input.n };
  },
});
`;
}

export interface RigOptions {
  redis: RedisServer;
  perSecond: number;
  perMinute: number;
  concurrency?: number;
  /** More settings for every replica. */
  env?: Record<string, string>;
}

export interface Figures {
  claimed: number;
  reported: number;
  duplicated: number;
  lost: number;
  rateLimited: number;
  maxPerSecond: number;
  maxPerMinute: number;
}

export class ClusterRig {
  readonly emulator: Emulator;
  readonly dir: string;
  readonly apiKey: string;
  readonly #options: RigOptions;
  readonly daemons = new Map<string, CliProcess>();
  /** Every process started, for the logs of those killed too. */
  readonly #all: { name: string; process: CliProcess }[] = [];

  private constructor(dir: string, options: RigOptions, apiKey: string) {
    this.dir = dir;
    this.#options = options;
    this.apiKey = apiKey;
    this.emulator = new Emulator({
      apiKeys: [apiKey],
      limits: { perSecond: options.perSecond, perMinute: options.perMinute, perMonth: PER_MONTH },
    });
  }

  static async create(options: RigOptions): Promise<ClusterRig> {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'df-worker-cluster-'));
    const rig = new ClusterRig(dir, options, `cluster-key-${path.basename(dir)}`);
    await rig.emulator.listen();
    await mkdir(path.join(dir, 'handlers'));
    for (const key of TASKS) {
      rig.emulator.createTask({
        key,
        inputKeys: [
          { key: 'n', description: '' },
          { key: 'ms', description: '' },
        ],
      });
      await writeFile(path.join(dir, 'handlers', `${key}.ts`), handlerSource(key));
    }
    return rig;
  }

  /** Starts replica `name` and waits until it has started. */
  async start(name: string, env: Record<string, string> = {}): Promise<CliProcess> {
    const daemon = this.launch(name, env);
    await waitFor(
      () =>
        daemon.logs().some((l) => l.msg === 'df-worker started (clustered)') ||
        daemon.child.exitCode !== null,
      `replica ${name} to start`,
      30_000,
    );
    if (daemon.child.exitCode !== null)
      throw new Error(`replica ${name} exited:\n${daemon.stderr()}\n${daemon.stdout()}`);
    return daemon;
  }

  /** Starts replica `name` (with more settings `env`) without waiting for anything. */
  launch(name: string, env: Record<string, string> = {}): CliProcess {
    const daemon = runCli(['start'], {
      DF_API_URL: this.emulator.url,
      DF_API_KEY: this.apiKey,
      DF_REDIS_URL: this.#options.redis.url,
      DF_REPLICA_ID: name,
      DF_HANDLERS_DIR: path.join(this.dir, 'handlers'),
      DF_STATE_DIR: path.join(this.dir, `state-${name}`),
      DF_HTTP_PORT: '0',
      DF_HTTP_HOST: '127.0.0.1',
      DF_LOG_LEVEL: 'info',
      DF_CONCURRENCY: String(this.#options.concurrency ?? 4),
      DF_BUDGET_PER_SECOND: String(this.#options.perSecond),
      DF_BUDGET_PER_MINUTE: String(this.#options.perMinute),
      DF_BUDGET_PER_MONTH: String(PER_MONTH),
      // Empty polls re-poll soon: executions queued mid-run are picked up within a second.
      DF_MAX_POLL_INTERVAL_MS: '1000',
      DF_MIN_POLL_INTERVAL_MS: '0',
      DF_SHUTDOWN_GRACE_MS: '10000',
      // The service here is the emulator in the test's process, stamping arrivals on its event loop: on a loaded
      // machine a request's arrival varies by more than the default 200 ms after its slot was taken (runs beside
      // two busy loops saw 6 in a second, and 61 against 60). The margin a slow network to the service would need.
      DF_BUDGET_SAFETY_MARGIN_MS: '500',
      ...this.#options.env,
      ...env,
    });
    this.daemons.set(name, daemon);
    this.#all.push({ name, process: daemon });
    return daemon;
  }

  /** The replica holding the coordinator lease, from the logs (last 'took' without a later 'stopped'). */
  coordinator(): string | undefined {
    let holder: { name: string; at: number } | undefined;
    for (const [name, daemon] of this.daemons) {
      if (daemon.child.exitCode !== null || daemon.child.signalCode !== null) continue;
      const events = daemon
        .logs()
        .filter(
          (l) =>
            l.msg === 'took the coordinator lease: polling for the cluster' ||
            l.msg === 'stopped polling for the cluster',
        );
      const last = events.at(-1);
      if (
        last?.msg === 'took the coordinator lease: polling for the cluster' &&
        (!holder || (last.time as number) > holder.at)
      ) {
        holder = { name, at: last.time as number };
      }
    }
    return holder?.name;
  }

  /** Sends `signal` to replica `name` and leaves it running (SIGSTOP, SIGCONT). */
  signal(name: string, signal: NodeJS.Signals): void {
    this.daemons.get(name)!.child.kill(signal);
  }

  async kill(name: string, signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    const daemon = this.daemons.get(name)!;
    this.daemons.delete(name);
    daemon.child.kill(signal);
    await daemon.exited;
  }

  enqueue(count: number, input: (n: number) => Record<string, number> = (n) => ({ n })): void {
    for (let n = 0; n < count; n++) this.emulator.enqueueExecution(TASKS[n % TASKS.length]!, input(n));
  }

  done(): boolean {
    return this.emulator.executions().every((e) => e.reports.length > 0);
  }

  /** Replicas that reported at least one execution, by name, from every process's logs. */
  reportsByReplica(): Map<string, number> {
    const by = new Map<string, number>();
    for (const { name, process } of this.#all) {
      const count = process.logs().filter((l) => l.msg === 'execution reported').length;
      by.set(name, (by.get(name) ?? 0) + count);
    }
    return by;
  }

  /** Executions replica `name` started and has not reported, from its logs. */
  runningOn(name: string): string[] {
    const logs = this.logsOf(name);
    const reported = new Set(logs.filter((l) => l.msg === 'execution reported').map((l) => l.executionId));
    return logs
      .filter((l) => l.msg === 'execution claimed' && !reported.has(l.executionId))
      .map((l) => l.executionId as string);
  }

  logsOf(name: string): Record<string, unknown>[] {
    return this.#all.filter((d) => d.name === name).flatMap((d) => d.process.logs());
  }

  /** The status of replica `name`'s GET /readyz. */
  async readyStatus(name: string): Promise<number> {
    return (await this.readiness(name)).status;
  }

  /** Replica `name`'s GET /readyz: its status and each check's reason (only the failing ones). */
  async readiness(name: string): Promise<{ status: number; reasons: Record<string, string> }> {
    const response = await fetch(`${this.#httpUrl(name)}/readyz`, { signal: AbortSignal.timeout(2_000) });
    const body = (await response.json()) as { checks: Record<string, { ok: boolean; reason?: string }> };
    const failing = Object.entries(body.checks).filter(([, check]) => !check.ok);
    return {
      status: response.status,
      reasons: Object.fromEntries(failing.map(([check, { reason }]) => [check, reason ?? ''])),
    };
  }

  /** Replica `name`'s GET /metrics. */
  async metrics(name: string): Promise<string> {
    return (await fetch(`${this.#httpUrl(name)}/metrics`, { signal: AbortSignal.timeout(2_000) })).text();
  }

  #httpUrl(name: string): string {
    const line = this.daemons
      .get(name)!
      .logs()
      .find((l) => l.msg === 'serving /metrics, /healthz and /readyz');
    if (line === undefined) throw new Error(`replica ${name} serves no /readyz yet`);
    return line.url as string;
  }

  /** The key's month count as Redis holds it: every request any replica sent. */
  async monthCount(): Promise<number> {
    const redis = new Redis(this.#options.redis.url);
    try {
      const counts = await redis.hgetall(clusterKeys(this.apiKey).month);
      return Object.values(counts).reduce((sum, n) => sum + Number(n), 0);
    } finally {
      redis.disconnect();
    }
  }

  figures(): Figures {
    const executions = this.emulator.executions();
    const requests = this.emulator.requests().filter((r) => r.apiKeyValid && r.status !== 0);
    const times = requests.map((r) => r.at).sort((a, b) => a - b);
    const most = (spanMs: number) => {
      let best = 0;
      let start = 0;
      for (let end = 0; end < times.length; end++) {
        while (times[end]! - times[start]! >= spanMs) start++;
        best = Math.max(best, end - start + 1);
      }
      return best;
    };
    return {
      claimed: executions.filter((e) => e.claimedAt !== undefined).length,
      reported: executions.filter((e) => e.reports.length > 0).length,
      duplicated: executions.reduce((sum, e) => sum + Math.max(0, e.reports.length - 1), 0),
      lost: executions.filter((e) => e.claimedAt !== undefined && e.reports.length === 0).length,
      rateLimited: requests.filter((r) => r.rateLimited).length,
      maxPerSecond: most(1_000),
      maxPerMinute: most(60_000),
    };
  }

  async dispose(): Promise<void> {
    await Promise.all(
      [...this.daemons.values()].map(async (d) => {
        d.child.kill('SIGCONT');
        d.child.kill('SIGKILL');
        await d.exited;
      }),
    );
    this.daemons.clear();
    await this.emulator.close();
    await rm(this.dir, { recursive: true, force: true });
  }
}

/**
 * For a describe block whose test makes one rig: a redis-server started before it, and the rig and the server
 * disposed after it.
 */
export function clusterFixture(): {
  redis: () => RedisServer;
  create: (options: Omit<RigOptions, 'redis'>) => Promise<ClusterRig>;
} {
  let redis: RedisServer | undefined;
  let rig: ClusterRig | undefined;
  beforeAll(async () => {
    redis = await RedisServer.start();
  });
  afterAll(async () => {
    await rig?.dispose();
    await redis?.dispose();
  });
  return {
    redis: () => redis!,
    create: async (options) => (rig = await ClusterRig.create({ ...options, redis: redis! })),
  };
}
