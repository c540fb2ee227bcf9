// Resource use of the real daemon (`df-worker start` as a child process) against the emulator on loopback, with
// 20 handler modules and 20 tasks: time from spawn to the first poll, resident memory and CPU while idle, then
// peak resident memory draining a backlog with the service's limits lifted. Each figure is printed beside the
// baseline measured in the same run: the daemon as it behaved before the footprint work, chosen by environment
// (handler workers kept warm for ever, the main heap unsized), each configuration in a fresh emulator and process.
//   npm run bench:footprint [-- --idle-s 30 --backlog 3000 --snapshot DIR]
// With --snapshot DIR, each daemon writes a heap snapshot of its main thread after the idle phase and after the
// drain, into DIR/<configuration> (node --heapsnapshot-signal, through NODE_OPTIONS).
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, type AddressInfo } from 'node:net';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Emulator } from '../src/emulator/index.ts';

const { values } = parseArgs({
  options: {
    'idle-s': { type: 'string', default: '30' },
    backlog: { type: 'string', default: '3000' },
    tasks: { type: 'string', default: '20' },
    snapshot: { type: 'string' },
    only: { type: 'string' },
    try: { type: 'string', multiple: true },
  },
});
const idleSeconds = Number(values['idle-s']);
const backlog = Number(values.backlog);
const taskCount = Number(values.tasks);
const root = fileURLToPath(new URL('..', import.meta.url));
const ticksPerSecond = 100;
const DRAIN_LIMIT_S = 240;

/** The configurations compared: the baseline restores the behaviour before the footprint work. */
const CONFIGURATIONS: Record<string, Record<string, string>> = {
  baseline: { DF_HANDLER_IDLE_TIMEOUT_MS: '0' },
  current: {},
};

interface Figures {
  firstPollMs: number;
  idle: { seconds: number; rssMb: number; cpuPercent: number; memory: MemoryBreakdown };
  drain: {
    executions: number;
    seconds: number;
    peakRssMb: number;
    rssMbAfter: number;
    cpuPercent: number;
    memory: MemoryBreakdown;
  };
}

/** Where the resident memory is, as the daemon's /metrics says (main thread only for the heap figures). */
interface MemoryBreakdown {
  heapUsedMb: number;
  heapTotalMb: number;
  externalMb: number;
  handlerWorkers: number;
}

interface Daemon {
  child: ChildProcess;
  emulator: Emulator;
  keys: string[];
  metricsUrl: string;
  spawnedAt: number;
  close(): Promise<void>;
}

/** A fresh emulator with 20 tasks, and the daemon started against it with 20 handler modules. */
async function startDaemon(
  name: string,
  extraEnv: Record<string, string>,
  limitsLifted: boolean,
): Promise<Daemon> {
  const dir = await mkdtemp(join(tmpdir(), 'df-worker-footprint-'));
  await mkdir(join(dir, 'handlers'));
  const keys = Array.from({ length: taskCount }, (_, i) => `task-${String(i).padStart(2, '0')}`);
  for (const key of keys) {
    await writeFile(
      join(dir, 'handlers', `${key}.ts`),
      `import { defineTask } from 'df-worker';\nexport default defineTask({ key: '${key}', inputKeys: ['n'], outputKeys: ['n2'], handle: (i: { n: number }) => ({ n2: i.n * 2 }) });\n`,
    );
  }
  const emulator = new Emulator({
    apiKeys: ['bench'],
    ...(limitsLifted ? { limits: { perSecond: Infinity, perMinute: Infinity, perMonth: Infinity } } : {}),
  });
  const url = await emulator.listen();
  for (const key of keys) {
    emulator.createTask({
      key,
      inputKeys: [{ key: 'n', description: '' }],
      outputKeys: [{ key: 'n2', description: '' }],
    });
  }
  const port = await freePort();
  if (values.snapshot !== undefined) await mkdir(join(values.snapshot, name), { recursive: true });
  const spawnedAt = Date.now();
  const child = spawn(
    process.execPath,
    ['--conditions=df-worker-source', join(root, 'src/cli/main.ts'), 'start'],
    {
      env: {
        PATH: process.env.PATH ?? '',
        DF_API_URL: url,
        DF_API_KEY: 'bench',
        DF_HANDLERS_DIR: join(dir, 'handlers'),
        DF_STATE_DIR: join(dir, 'state'),
        DF_HTTP_PORT: String(port),
        DF_HTTP_HOST: '127.0.0.1',
        DF_LOG_LEVEL: 'warn',
        ...(limitsLifted
          ? {
              DF_BUDGET_PER_SECOND: '1000000',
              DF_BUDGET_PER_MINUTE: '10000000',
              DF_BUDGET_PER_MONTH: '100000000',
            }
          : {}),
        ...(values.snapshot === undefined
          ? {}
          : {
              NODE_OPTIONS: `--heapsnapshot-signal=SIGUSR2 --diagnostic-dir=${join(values.snapshot, name)}`,
            }),
        ...extraEnv,
      },
      stdio: ['ignore', 'ignore', 'inherit'],
    },
  );
  return {
    child,
    emulator,
    keys,
    metricsUrl: `http://127.0.0.1:${port}/metrics`,
    spawnedAt,
    close: async () => {
      child.kill('SIGTERM');
      if (child.exitCode === null) await new Promise((resolve) => child.on('exit', resolve));
      await emulator.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

async function firstPoll(daemon: Daemon): Promise<number> {
  const poll = () => daemon.emulator.requests().find((r) => r.operation === 'tasks.poll');
  while (!poll()) {
    if (daemon.child.exitCode !== null) throw new Error(`the daemon exited with ${daemon.child.exitCode}`);
    await sleep(2);
  }
  return poll()!.at - daemon.spawnedAt;
}

async function measure(name: string, env: Record<string, string>): Promise<Figures> {
  // Idle: the service's default limits and budget, as deployed; nothing to do for 20 tasks.
  const idler = await startDaemon(name, env, false);
  const firstPollMs = await firstPoll(idler);
  await sleep(3_000); // the first round of polls and the start-up garbage settle
  const idle = await phase(idler.child.pid!, idleSeconds);
  const idleMemory = await breakdown(idler.metricsUrl);
  await snapshot(idler.child, name, 'idle');
  await idler.close();

  // Draining: the service's limits and the budget lifted, so only the daemon sets the pace.
  const drainer = await startDaemon(name, env, true);
  await firstPoll(drainer);
  await sleep(1_000);
  const { emulator, keys } = drainer;
  for (let i = 0; i < backlog; i++) emulator.enqueueExecution(keys[i % keys.length]!, { n: i });
  const drain = await phase(drainer.child.pid!, DRAIN_LIMIT_S, () =>
    emulator.executions().every((e) => e.reports.length > 0),
  );
  await sleep(2_000);
  const after = await sample(drainer.child.pid!);
  const drainMemory = await breakdown(drainer.metricsUrl);
  await snapshot(drainer.child, name, 'drained');
  const reported = emulator.executions().filter((e) => e.reports.length > 0).length;
  await drainer.close();
  return {
    firstPollMs,
    idle: { seconds: idle.seconds, rssMb: idle.rssMbEnd, cpuPercent: idle.cpuPercent, memory: idleMemory },
    drain: {
      executions: reported,
      seconds: drain.seconds,
      peakRssMb: drain.rssMbMax,
      rssMbAfter: Math.round(after.rssMb),
      cpuPercent: drain.cpuPercent,
      memory: drainMemory,
    },
  };
}

async function breakdown(metricsUrl: string): Promise<MemoryBreakdown> {
  const text = await (await fetch(metricsUrl)).text();
  const read = (metric: string) =>
    Number(new RegExp(`^${metric}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
  const mb = (bytes: number) => Math.round(bytes / 2 ** 20);
  return {
    heapUsedMb: mb(read('dfworker_nodejs_heap_size_used_bytes')),
    heapTotalMb: mb(read('dfworker_nodejs_heap_size_total_bytes')),
    externalMb: mb(read('dfworker_nodejs_external_memory_bytes')),
    handlerWorkers: read('dfworker_handler_workers'),
  };
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

async function snapshot(child: ChildProcess, name: string, label: string): Promise<void> {
  if (values.snapshot === undefined) return;
  child.kill('SIGUSR2');
  await sleep(4_000);
  console.error(`${name}: heap snapshot after ${label} written to ${join(values.snapshot, name)}`);
}

async function sample(pid: number): Promise<{ rssMb: number; cpuTicks: number }> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const rssKb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
  const stat = (await readFile(`/proc/${pid}/stat`, 'utf8')).split(') ')[1]!.split(' ');
  return { rssMb: rssKb / 1024, cpuTicks: Number(stat[11]) + Number(stat[12]) };
}

async function phase(pid: number, seconds: number, until?: () => boolean) {
  const first = await sample(pid);
  const started = Date.now();
  let maxRss = first.rssMb;
  while ((until ? !until() : true) && Date.now() - started < seconds * 1000) {
    await sleep(until ? 100 : 500);
    maxRss = Math.max(maxRss, (await sample(pid)).rssMb);
  }
  const last = await sample(pid);
  const wallS = (Date.now() - started) / 1000;
  return {
    seconds: Math.round(wallS * 10) / 10,
    rssMbEnd: Math.round(last.rssMb),
    rssMbMax: Math.round(maxRss),
    cpuPercent: Math.round(((last.cpuTicks - first.cpuTicks) / ticksPerSecond / wallS) * 10_000) / 100,
  };
}

// --try 'DF_X=1 DF_Y=2' adds a configuration, for trying a setting beside the two above.
for (const [i, assignments] of (values.try ?? []).entries()) {
  CONFIGURATIONS[`try ${i + 1}`] = Object.fromEntries(
    assignments.split(/\s+/).map((a) => [a.slice(0, a.indexOf('=')), a.slice(a.indexOf('=') + 1)]),
  );
}
const results: Record<string, Figures> = {};
for (const [name, env] of Object.entries(CONFIGURATIONS)) {
  if (values.only !== undefined && !values.only.split(',').includes(name)) continue;
  results[name] = await measure(name, env);
  console.error(`${name}: ${JSON.stringify(results[name])}`);
}
const rows: Array<[string, (f: Figures) => number | string]> = [
  ['start to first poll (ms)', (f) => f.firstPollMs],
  [`idle RSS, ${taskCount} tasks, after ${idleSeconds} s (MB)`, (f) => f.idle.rssMb],
  [`idle CPU over ${idleSeconds} s (%)`, (f) => f.idle.cpuPercent],
  [`peak RSS draining ${backlog} executions (MB)`, (f) => f.drain.peakRssMb],
  ['RSS 2 s after the drain (MB)', (f) => f.drain.rssMbAfter],
  ['drain time (s)', (f) => f.drain.seconds],
  ['executions reported', (f) => f.drain.executions],
  ['idle: main heap used / total, external (MB)', (f) => memory(f.idle.memory)],
  ['idle: handler workers alive', (f) => f.idle.memory.handlerWorkers],
  ['drained: main heap used / total, external (MB)', (f) => memory(f.drain.memory)],
  ['drained: handler workers alive', (f) => f.drain.memory.handlerWorkers],
];
function memory(m: MemoryBreakdown): string {
  return `${m.heapUsedMb} / ${m.heapTotalMb}, ${m.externalMb}`;
}
const names = Object.keys(results);
console.log(['figure', ...names].join(' | '));
console.log(['---', ...names.map(() => '---')].join(' | '));
for (const [label, read] of rows)
  console.log([label, ...names.map((n) => String(read(results[n]!)))].join(' | '));
