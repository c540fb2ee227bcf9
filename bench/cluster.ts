// What clustered mode costs, beside the standalone baseline: Redis round trips per execution, the time from a
// claim (the emulator's answer to the poll) to the handler's start and to the report, and Redis memory per
// 1,000 queued executions. Real daemons (`df-worker start`), a real redis-server, the emulator on loopback.
//   npm run bench:cluster [-- --executions 120]
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { clusterKeys } from '../src/cluster/redis.ts';
import { runCli } from '../test/cli/process.ts';
import { ClusterRig, TASKS } from '../test/cluster/cluster-rig.ts';
import { RedisServer } from '../test/cluster/redis-server.ts';
import { waitFor } from '../test/daemon/harness.ts';

const { values } = parseArgs({ options: { executions: { type: 'string', default: '120' } } });
const EXECUTIONS = Number(values.executions);
const PER_SECOND = 20;
const PER_MINUTE = 1_200;

interface Run {
  label: string;
  claimToStartMs: number;
  claimToReportMs: number;
  redisCommandsPerExecution?: number;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? NaN;
}

/** Median time from the emulator's claim to the handler's start (the daemon's 'execution claimed') and report. */
function latencies(rig: ClusterRig, logs: Record<string, unknown>[]): { start: number; report: number } {
  const startedAt = new Map<string, number>();
  for (const l of logs) {
    if (l.msg === 'execution claimed') startedAt.set(l.executionId as string, Date.parse(l.time as string));
  }
  const toStart: number[] = [];
  const toReport: number[] = [];
  for (const e of rig.emulator.executions()) {
    const claimed = Date.parse(e.claimedAt!);
    const started = startedAt.get(e.id);
    if (started !== undefined) toStart.push(started - claimed);
    toReport.push(Date.parse(e.reports[0]!.at) - claimed);
  }
  return { start: median(toStart), report: median(toReport) };
}

/** Counts the commands clients send (round trips; not those a Lua script runs inside Redis), via MONITOR. */
async function roundTripCounter(url: string): Promise<{ count: () => number; stop: () => void }> {
  const redis = new Redis(url);
  const monitor = await redis.monitor();
  let count = 0;
  monitor.on('monitor', (_time: string, args: string[], source: string) => {
    if (source !== 'lua' && args[0]?.toLowerCase() !== 'monitor') count++;
  });
  return {
    count: () => count,
    stop: () => {
      monitor.disconnect();
      redis.disconnect();
    },
  };
}

async function standalone(server: RedisServer): Promise<Run> {
  const rig = await ClusterRig.create({ redis: server, perSecond: PER_SECOND, perMinute: PER_MINUTE });
  const dir = await mkdtemp(path.join(os.tmpdir(), 'df-worker-bench-'));
  const daemon = runCli(['start'], {
    DF_API_URL: rig.emulator.url,
    DF_API_KEY: rig.apiKey,
    DF_HANDLERS_DIR: path.join(rig.dir, 'handlers'),
    DF_STATE_DIR: path.join(dir, 'state'),
    DF_HTTP_PORT: '0',
    DF_HTTP_HOST: '127.0.0.1',
    DF_BUDGET_PER_SECOND: String(PER_SECOND),
    DF_BUDGET_PER_MINUTE: String(PER_MINUTE),
    DF_BUDGET_PER_MONTH: '10000000',
    DF_MAX_POLL_INTERVAL_MS: '1000',
    DF_MIN_POLL_INTERVAL_MS: '0',
  });
  try {
    await waitFor(
      () => daemon.logs().some((l) => l.msg === 'df-worker started'),
      'the standalone daemon',
      30_000,
    );
    rig.enqueue(EXECUTIONS);
    await waitFor(() => rig.done(), 'every execution reported', 120_000);
    const { start, report } = latencies(rig, daemon.logs());
    return { label: 'standalone (1 daemon)', claimToStartMs: start, claimToReportMs: report };
  } finally {
    daemon.child.kill('SIGKILL');
    await daemon.exited;
    await rig.dispose();
    await rm(dir, { recursive: true, force: true });
  }
}

async function clustered(server: RedisServer, replicas: string[]): Promise<Run> {
  const rig = await ClusterRig.create({ redis: server, perSecond: PER_SECOND, perMinute: PER_MINUTE });
  const counter = await roundTripCounter(server.url);
  try {
    await Promise.all(replicas.map((name) => rig.start(name)));
    // Heartbeats, lease renewals, blocking reads and idle polls go on whether or not there is work: apart.
    const idleFrom = counter.count();
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    const idlePerSecond = (counter.count() - idleFrom) / 3;
    const before = counter.count();
    const startedAt = Date.now();
    rig.enqueue(EXECUTIONS);
    await waitFor(() => rig.done(), 'every execution reported', 120_000);
    const seconds = (Date.now() - startedAt) / 1000;
    const calls = counter.count() - before - idlePerSecond * seconds;
    const logs = replicas.flatMap((name) => rig.logsOf(name));
    const { start, report } = latencies(rig, logs);
    console.log(
      `  ${replicas.length} replica(s): ${Math.round(idlePerSecond)} Redis round trips a second when idle (idle polls' ` +
        'budget slots, heartbeats, lease, blocking reads)',
    );
    return {
      label: `clustered (${replicas.length} replica${replicas.length > 1 ? 's' : ''})`,
      claimToStartMs: start,
      claimToReportMs: report,
      redisCommandsPerExecution: calls / EXECUTIONS,
    };
  } finally {
    counter.stop();
    await rig.dispose();
  }
}

/** Redis memory taken by 1,000 executions waiting in the queue, as the coordinator adds them. */
async function memoryPerThousand(server: RedisServer): Promise<number> {
  const keys = clusterKeys('bench-memory-key');
  const redis = new Redis(server.url);
  const queue = new Queue(keys.queue, {
    prefix: keys.prefix,
    connection: { host: '127.0.0.1', port: server.port },
  });
  try {
    const used = async () => Number(/used_memory:(\d+)/.exec(await redis.info('memory'))![1]);
    const before = await used();
    for (let n = 0; n < 1_000; n++) {
      await queue.add(
        'execution',
        {
          taskId: 'task-1',
          taskKey: TASKS[n % 3],
          executionId: `execution-${n}`,
          input: { n, orderId: `order-${100_000 + n}` },
          createdAt: new Date().toISOString(),
          claimedAt: new Date().toISOString(),
        },
        { jobId: `execution-${n}`, attempts: 1_000, backoff: { type: 'fixed', delay: 1_000 } },
      );
    }
    const after = await used();
    await queue.obliterate({ force: true });
    return after - before;
  } finally {
    await queue.close();
    redis.disconnect();
  }
}

const server = await RedisServer.start();
try {
  console.log(
    `bench:cluster: ${EXECUTIONS} executions of a 20 ms handler, budget ${PER_SECOND}/s, ${PER_MINUTE}/min`,
  );
  const runs = [
    await standalone(server),
    await clustered(server, ['a']),
    await clustered(server, ['a', 'b', 'c']),
  ];
  const bytes = await memoryPerThousand(server);
  console.log(
    '\nmode | claim → handler start (median ms) | claim → report (median ms) | Redis round trips per execution',
  );
  console.log('--- | --- | --- | ---');
  for (const run of runs) {
    const commands =
      run.redisCommandsPerExecution === undefined ? '0' : run.redisCommandsPerExecution.toFixed(1);
    console.log(`${run.label} | ${run.claimToStartMs} | ${run.claimToReportMs} | ${commands}`);
  }
  console.log(`\nRedis memory per 1,000 queued executions (small inputs): ${(bytes / 1024).toFixed(0)} KiB`);
} finally {
  await server.dispose();
}
