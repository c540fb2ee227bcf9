// What clustered mode costs, beside the standalone baseline: Redis round trips per execution, the time from a
// claim (the emulator's answer to the poll) to the handler's start and to the report, and Redis memory per
// 1,000 executions, queued and kept after completion. The clustered runs go twice: on a worktree of --baseline
// (default dad65f1, before reports were fenced) and on this checkout, so the fence's cost shows beside it.
// Real daemons (`df-worker start`), a real redis-server, the emulator on loopback.
//   npm run bench:cluster [-- --executions 120 --baseline <commit>|none]
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { JobFence } from '../src/clustered/job-fence.ts';
import { clusterKeys } from '../src/clustered/redis.ts';
import { systemClock } from '../src/clock/clock.ts';
import { REPO_ROOT, runCli } from '../test/cli/process.ts';
import { ClusterRig, TASKS } from '../test/cluster/cluster-rig.ts';
import { RedisServer } from '../test/cluster/redis-server.ts';
import { waitFor } from '../test/daemon/harness.ts';

const { values } = parseArgs({
  options: {
    executions: { type: 'string', default: '120' },
    baseline: { type: 'string', default: 'dad65f1' },
  },
});
const EXECUTIONS = Number(values.executions);
const PER_SECOND = 20;
const PER_MINUTE = 1_200;

interface Run {
  label: string;
  claimToStartMs: number;
  claimToReportMs: number;
  redisCommandsPerExecution?: number;
  /** Report fences (lock check and extension, one script) per execution. */
  fencesPerExecution?: number;
  /** Writes of the claim's room in Redis (ClaimRoom) per execution. */
  claimRoomsPerExecution?: number;
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

interface Counter {
  count: () => number;
  fences: () => number;
  claimRooms: () => number;
  stop: () => void;
}

/** Counts the commands clients send (round trips; not those a Lua script runs inside Redis), via MONITOR. */
async function roundTripCounter(url: string): Promise<Counter> {
  const redis = new Redis(url);
  const monitor = await redis.monitor();
  let count = 0;
  let fences = 0;
  let claimRooms = 0;
  monitor.on('monitor', (_time: string, args: string[], source: string) => {
    if (source === 'lua' || args[0]?.toLowerCase() === 'monitor') return;
    count++;
    const command = args[0]?.toLowerCase();
    // The fence's script: two keys, a job's lock and the job (BullMQ's own lock scripts name other keys).
    if ((command === 'evalsha' || command === 'eval') && args[3] === `${args[4]}:lock`) fences++;
    if (command === 'set' && args[1]?.includes(':claim-room:')) claimRooms++;
  });
  return {
    count: () => count,
    fences: () => fences,
    claimRooms: () => claimRooms,
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

async function clustered(server: RedisServer, replicas: string[], build: string): Promise<Run> {
  const rig = await ClusterRig.create({ redis: server, perSecond: PER_SECOND, perMinute: PER_MINUTE });
  const counter = await roundTripCounter(server.url);
  try {
    await Promise.all(replicas.map((name) => rig.start(name)));
    // Heartbeats, lease renewals, blocking reads and idle polls go on whether or not there is work: apart.
    const idleFrom = counter.count();
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    const idlePerSecond = (counter.count() - idleFrom) / 3;
    const before = counter.count();
    const [fencesBefore, roomsBefore] = [counter.fences(), counter.claimRooms()];
    const startedAt = Date.now();
    rig.enqueue(EXECUTIONS);
    await waitFor(() => rig.done(), 'every execution reported', 120_000);
    const seconds = (Date.now() - startedAt) / 1000;
    const calls = counter.count() - before - idlePerSecond * seconds;
    const logs = replicas.flatMap((name) => rig.logsOf(name));
    const { start, report } = latencies(rig, logs);
    console.log(
      `  ${replicas.length} replica(s), ${build}: ${Math.round(idlePerSecond)} Redis round trips a second when idle (idle polls' ` +
        'budget slots, heartbeats, lease, blocking reads)',
    );
    return {
      label: `clustered (${replicas.length} replica${replicas.length > 1 ? 's' : ''}), ${build}`,
      claimToStartMs: start,
      claimToReportMs: report,
      redisCommandsPerExecution: calls / EXECUTIONS,
      fencesPerExecution: (counter.fences() - fencesBefore) / EXECUTIONS,
      claimRoomsPerExecution: (counter.claimRooms() - roomsBefore) / EXECUTIONS,
    };
  } finally {
    counter.stop();
    await rig.dispose();
  }
}

/** Latency of the report fence (one script: check and extend a job's lock), over 1,000 checks, in ms. */
async function fenceLatency(server: RedisServer): Promise<{ median: number; p99: number }> {
  const redis = new Redis(server.url);
  const fence = new JobFence({ redis, prefix: 'bench', queue: 'fence', lockMs: 5_000, clock: systemClock });
  try {
    await redis.set('bench:fence:job-1:lock', 'token-1');
    const job = { id: 'job-1', token: 'token-1' } as Parameters<JobFence['owns']>[0];
    const took: number[] = [];
    for (let n = 0; n < 1_000; n++) {
      const started = performance.now();
      if (!(await fence.owns(job))) throw new Error('the fence refused its own lock');
      took.push(performance.now() - started);
    }
    took.sort((a, b) => a - b);
    return { median: took[500]!, p99: took[990]! };
  } finally {
    await redis.del('bench:fence:job-1:lock');
    redis.disconnect();
  }
}

/** A worktree of `commit` sharing this checkout's node_modules; removed at exit. */
function baselineCheckout(commit: string): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'df-worker-baseline-'));
  execFileSync('git', ['worktree', 'add', '--detach', dir, commit], { cwd: REPO_ROOT, stdio: 'ignore' });
  symlinkSync(path.join(REPO_ROOT, 'node_modules'), path.join(dir, 'node_modules'));
  process.on('exit', () => {
    execFileSync('git', ['worktree', 'remove', '--force', dir], { cwd: REPO_ROOT, stdio: 'ignore' });
    if (existsSync(dir)) rmSync(dir, { recursive: true, force: true });
  });
  return dir;
}

/** Runs `work` on the daemon of `root` (a baseline worktree), or of this checkout when undefined. */
async function onBuild<T>(root: string | undefined, work: () => Promise<T>): Promise<T> {
  if (root === undefined) delete process.env.DF_WORKER_UNDER_TEST;
  else process.env.DF_WORKER_UNDER_TEST = root;
  try {
    return await work();
  } finally {
    delete process.env.DF_WORKER_UNDER_TEST;
  }
}

/**
 * Redis memory taken by 1,000 executions: waiting in the queue as the coordinator adds them, then completed and
 * kept (their outcome stored with them, as replicas do, and BullMQ's event stream, capped at 10,000 events).
 */
async function memoryPerThousand(
  server: RedisServer,
): Promise<{ queued: number; completed: number; events: number }> {
  const keys = clusterKeys('bench-memory-key');
  const redis = new Redis(server.url);
  const connection = { host: '127.0.0.1', port: server.port };
  const queue = new Queue(keys.queue, { prefix: keys.prefix, connection });
  try {
    const used = async () => Number(/used_memory:(\d+)/.exec(await redis.info('memory'))![1]);
    const before = await used();
    for (let n = 0; n < 1_000; n++) {
      const claimedAt = new Date().toISOString();
      await queue.add(
        'execution',
        {
          taskId: 'task-1',
          taskKey: TASKS[n % 3],
          executionId: `execution-${n}`,
          input: { n, orderId: `order-${100_000 + n}` },
          createdAt: claimedAt,
          claimedAt,
        },
        {
          jobId: `execution-${n}@${Date.parse(claimedAt)}`,
          attempts: 1_000,
          backoff: { type: 'fixed', delay: 1_000 },
          removeOnComplete: { age: 3_600 },
          removeOnFail: { age: 7 * 86_400 },
        },
      );
    }
    const queued = (await used()) - before;
    let done = 0;
    const worker = new Worker<{ input: { n: number }; outcome?: object }>(
      keys.queue,
      async (job) => {
        const outcome = {
          status: 'COMPLETED',
          output: { n: job.data.input.n },
          attempts: 1,
          finishedAt: new Date().toISOString(),
        };
        await job.updateData({ ...job.data, outcome });
        return 'replica-a';
      },
      { prefix: keys.prefix, connection: { ...connection, maxRetriesPerRequest: null }, concurrency: 50 },
    );
    worker.on('completed', () => done++);
    while (done < 1_000) await new Promise((resolve) => setTimeout(resolve, 50));
    await worker.close();
    const completed = (await used()) - before;
    const events = Number(await redis.memory('USAGE', `${keys.prefix}:${keys.queue}:events`));
    await queue.obliterate({ force: true });
    return { queued, completed, events };
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
  const baseline = values.baseline === 'none' ? undefined : values.baseline;
  const baselineRoot = baseline === undefined ? undefined : baselineCheckout(baseline);
  const runs = [await standalone(server)];
  for (const replicas of [['a'], ['a', 'b', 'c']]) {
    if (baseline !== undefined)
      runs.push(await onBuild(baselineRoot, () => clustered(server, replicas, `baseline ${baseline}`)));
    runs.push(await onBuild(undefined, () => clustered(server, replicas, 'now (fenced)')));
  }
  const bytes = await memoryPerThousand(server);
  const fence = await fenceLatency(server);
  console.log(
    '\nmode | claim → handler start (median ms) | claim → report (median ms) | Redis round trips per execution ' +
      '| of which report fences | of which claim-room writes',
  );
  console.log('--- | --- | --- | --- | --- | ---');
  const per = (value: number | undefined) => (value === undefined ? '0' : value.toFixed(2));
  for (const run of runs) {
    const commands =
      run.redisCommandsPerExecution === undefined ? '0' : run.redisCommandsPerExecution.toFixed(1);
    console.log(
      `${run.label} | ${run.claimToStartMs} | ${run.claimToReportMs} | ${commands} | ` +
        `${per(run.fencesPerExecution)} | ${per(run.claimRoomsPerExecution)}`,
    );
  }
  console.log(
    `\nreport fence (one script: check the job's lock, extend it): median ${fence.median.toFixed(3)} ms, ` +
      `p99 ${fence.p99.toFixed(3)} ms per check, over 1,000 checks on loopback`,
  );
  console.log(
    `Redis memory per 1,000 executions (small inputs): ${(bytes.queued / 1024).toFixed(0)} KiB queued, ` +
      `${(bytes.completed / 1024).toFixed(0)} KiB completed and kept (of which BullMQ's event stream ` +
      `${(bytes.events / 1024).toFixed(0)} KiB, capped at 10,000 events)`,
  );
} finally {
  await server.dispose();
}
