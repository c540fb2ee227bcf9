// Resource use of the real daemon (`df-worker start` as a child process) against the emulator on loopback, with
// 20 handler modules and 20 tasks: time from spawn to the first poll, resident memory and CPU while idle, then
// peak resident memory draining a backlog with the service's limits lifted (the daemon's own, and with its
// handler processes), and what is left once the handler workers were idle past DF_HANDLER_IDLE_TIMEOUT_MS. Each figure is printed beside the baseline measured in the
// same run: the daemon's code as it was before the footprint work (git ref --baseline-ref, extracted with
// `git archive` to a temp folder), each configuration in a fresh emulator and process.
//   npm run bench:footprint [-- --idle-s 30 --backlog 3000 --starts 5 --baseline-ref face1c1 --try 'DF_X=1 DF_Y=2' --built]
// With --snapshot DIR, each daemon writes a heap snapshot of its main thread after the idle phase and after the
// drain, into DIR/<configuration> (node --heapsnapshot-signal, through NODE_OPTIONS).
// The daemon's idle and peak resident memory (of `built` with --built, else of `now`) are written to
// bench/figures.json, which the guides quote through `npm run docs`; --no-write leaves it alone.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createServer, type AddressInfo } from 'node:net';
import { mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Emulator } from '../src/emulator/index.ts';
import { writeFigures } from '../src/docs/figures.ts';

const { values } = parseArgs({
  options: {
    'idle-s': { type: 'string', default: '30' },
    // Starts timed to the first poll, per configuration: the first with an empty compile cache, the median of the rest.
    starts: { type: 'string', default: '5' },
    backlog: { type: 'string', default: '3000' },
    tasks: { type: 'string', default: '20' },
    snapshot: { type: 'string' },
    only: { type: 'string' },
    try: { type: 'string', multiple: true },
    // Also run the compiled build (dist/, built first), as the container image does.
    built: { type: 'boolean', default: false },
    // The commit before issue 10's footprint work.
    'baseline-ref': { type: 'string', default: 'face1c1' },
    'no-write': { type: 'boolean', default: false },
  },
});
const idleSeconds = Number(values['idle-s']);
const backlog = Number(values.backlog);
const taskCount = Number(values.tasks);
const root = fileURLToPath(new URL('..', import.meta.url));
const ticksPerSecond = 100;
const DRAIN_LIMIT_S = 240;

const AFTER_DRAIN_S = 35;
const STARTS = Math.max(2, Number(values.starts));

interface Configuration {
  /** The checkout whose src/cli/main.ts runs. */
  root: string;
  env: Record<string, string>;
  /**
   * Node's compile cache folder of this configuration's starts (NODE_COMPILE_CACHE); none for the code before,
   * since the variable alone turns the cache on.
   */
  compileCache?: string;
  /** Runs dist/cli/main.js (the image's entry point) instead of the sources. */
  built?: boolean;
}

/** The configurations compared: the code before the footprint work, and this checkout's defaults. */
const CONFIGURATIONS: Record<string, Configuration> = {
  before: { root: await checkout(values['baseline-ref']), env: {} },
  now: { root, env: {}, compileCache: await emptyFolder() },
};

function emptyFolder(): Promise<string> {
  return mkdtemp(join(tmpdir(), 'df-worker-compile-cache-'));
}

/**
 * The daemon's code at `ref`, in a temp folder beside this checkout's node_modules (undici and convict stay
 * devDependencies for it: the code before imports them, the daemon no longer does).
 */
async function checkout(ref: string): Promise<string> {
  const folder = await mkdtemp(join(tmpdir(), 'df-worker-baseline-'));
  const archive = spawnSync(
    'git',
    ['-C', root, 'archive', '--format=tar', ref, 'src', 'config', 'package.json'],
    {
      maxBuffer: 256 * 2 ** 20,
    },
  );
  if (archive.status !== 0) throw new Error(`git archive ${ref} failed: ${archive.stderr.toString()}`);
  const untar = spawnSync('tar', ['-x', '-C', folder], { input: archive.stdout });
  if (untar.status !== 0) throw new Error(`tar failed: ${untar.stderr.toString()}`);
  await symlink(join(root, 'node_modules'), join(folder, 'node_modules'));
  return folder;
}

interface Figures {
  /** The first start, with an empty compile cache (a fresh container), then the median of the others. */
  firstPollMs: { cold: number; warm: number };
  idle: { seconds: number; rssMb: number; cpuPercent: number; memory: MemoryBreakdown };
  drain: {
    executions: number;
    seconds: number;
    peakRssMb: number;
    /** The daemon and its handler processes together (DF_HANDLER_ISOLATION=process), at their peak. */
    peakTreeRssMb: number;
    rssMbDrained: number;
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
  configuration: Configuration,
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
    configuration.built
      ? [join(configuration.root, 'dist/cli/main.js'), 'start']
      : ['--conditions=df-worker-source', join(configuration.root, 'src/cli/main.ts'), 'start'],
    {
      env: {
        PATH: process.env.PATH ?? '',
        // Empty at the first start of each configuration, as in a fresh container.
        ...(configuration.compileCache === undefined
          ? {}
          : { NODE_COMPILE_CACHE: configuration.compileCache }),
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
        ...configuration.env,
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

/**
 * Start to first poll, on a first start (an empty compile cache) and then as the median of a few more starts
 * (it varies from start to start with the disk cache and what the other core does).
 */
async function startsToFirstPoll(
  name: string,
  configuration: Configuration,
): Promise<{ cold: number; warm: number }> {
  const figures: number[] = [];
  for (let i = 0; i < STARTS; i++) {
    const daemon = await startDaemon(name, configuration, false);
    figures.push(await firstPoll(daemon));
    await daemon.close();
  }
  const warm = figures.slice(1).sort((a, b) => a - b);
  return { cold: figures[0]!, warm: warm[Math.floor(warm.length / 2)]! };
}

async function measure(name: string, configuration: Configuration): Promise<Figures> {
  const firstPollMs = await startsToFirstPoll(name, configuration);
  // Idle: the service's default limits and budget, as deployed; nothing to do for 20 tasks.
  const idler = await startDaemon(name, configuration, false);
  await firstPoll(idler);
  await sleep(3_000); // the first round of polls and the start-up garbage settle
  const idle = await phase(idler.child.pid!, idleSeconds);
  const idleMemory = await breakdown(idler.metricsUrl);
  await snapshot(idler.child, name, 'idle');
  await idler.close();

  // Draining: the service's limits and the budget lifted, so only the daemon sets the pace.
  const drainer = await startDaemon(name, configuration, true);
  await firstPoll(drainer);
  await sleep(1_000);
  const { emulator, keys } = drainer;
  for (let i = 0; i < backlog; i++) emulator.enqueueExecution(keys[i % keys.length]!, { n: i });
  const drain = await phase(drainer.child.pid!, DRAIN_LIMIT_S, () =>
    emulator.executions().every((e) => e.reports.length > 0),
  );
  const settled = await sample(drainer.child.pid!);
  await sleep(AFTER_DRAIN_S * 1000);
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
      peakTreeRssMb: drain.treeRssMbMax,
      rssMbDrained: Math.round(settled.rssMb),
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

/** Resident memory of `pid` and every process under it, in MB (handler processes share the node binary's pages). */
async function treeRssMb(pid: number): Promise<number> {
  const parents = new Map<number, number>();
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = (await readFile(`/proc/${entry}/stat`, 'utf8')).split(') ')[1]!.split(' ');
      parents.set(Number(entry), Number(stat[1]));
    } catch {
      // Gone since readdir.
    }
  }
  const inTree = (candidate: number): boolean => {
    for (let p: number | undefined = candidate; p !== undefined && p > 1; p = parents.get(p)) {
      if (p === pid) return true;
    }
    return false;
  };
  let total = 0;
  for (const member of [...parents.keys()].filter(inTree)) {
    try {
      total += (await sample(member)).rssMb;
    } catch {
      // Gone since readdir.
    }
  }
  return total;
}

async function phase(pid: number, seconds: number, until?: () => boolean) {
  const first = await sample(pid);
  const started = Date.now();
  let maxRss = first.rssMb;
  let maxTreeRss = first.rssMb;
  while ((until ? !until() : true) && Date.now() - started < seconds * 1000) {
    await sleep(until ? 100 : 500);
    maxRss = Math.max(maxRss, (await sample(pid)).rssMb);
    if (until) maxTreeRss = Math.max(maxTreeRss, await treeRssMb(pid));
  }
  const last = await sample(pid);
  const wallS = (Date.now() - started) / 1000;
  return {
    seconds: Math.round(wallS * 10) / 10,
    rssMbEnd: Math.round(last.rssMb),
    rssMbMax: Math.round(maxRss),
    treeRssMbMax: Math.round(maxTreeRss),
    cpuPercent: Math.round(((last.cpuTicks - first.cpuTicks) / ticksPerSecond / wallS) * 10_000) / 100,
  };
}

// --try 'DF_X=1 DF_Y=2' adds a configuration, for trying a setting beside the two above.
if (values.built) {
  const build = spawnSync('npm', ['run', '-s', 'build'], { cwd: root, stdio: 'inherit' });
  if (build.status !== 0) throw new Error('npm run build failed');
  // With the image's NODE_OPTIONS (see Dockerfile).
  CONFIGURATIONS.built = {
    root,
    env: { NODE_OPTIONS: '--max-semi-space-size=2' },
    compileCache: await emptyFolder(),
    built: true,
  };
}
// With --built, a trial runs the build too, with the image's NODE_OPTIONS unless it sets its own.
for (const [i, assignments] of (values.try ?? []).entries()) {
  const env = Object.fromEntries(
    assignments.split(/\s+/).map((a) => [a.slice(0, a.indexOf('=')), a.slice(a.indexOf('=') + 1)]),
  );
  CONFIGURATIONS[`try ${i + 1}`] = values.built
    ? { root, compileCache: await emptyFolder(), env: { ...CONFIGURATIONS.built!.env, ...env }, built: true }
    : { root, compileCache: await emptyFolder(), env };
}
const results: Record<string, Figures> = {};
for (const [name, configuration] of Object.entries(CONFIGURATIONS)) {
  if (values.only !== undefined && !values.only.split(',').includes(name)) continue;
  results[name] = await measure(name, configuration);
  console.error(`${name}: ${JSON.stringify(results[name])}`);
}
const rows: Array<[string, (f: Figures) => number | string]> = [
  ['start to first poll, first start (ms)', (f) => f.firstPollMs.cold],
  [`start to first poll, median of the next ${STARTS - 1} starts (ms)`, (f) => f.firstPollMs.warm],
  [`idle RSS, ${taskCount} tasks, after ${idleSeconds} s (MB)`, (f) => f.idle.rssMb],
  [`idle CPU over ${idleSeconds} s (%)`, (f) => f.idle.cpuPercent],
  [`peak RSS draining ${backlog} executions (MB)`, (f) => f.drain.peakRssMb],
  [`peak RSS draining, with handler processes (MB)`, (f) => f.drain.peakTreeRssMb],
  ['RSS as the drain ends (MB)', (f) => f.drain.rssMbDrained],
  [`RSS ${AFTER_DRAIN_S} s after the drain (MB)`, (f) => f.drain.rssMbAfter],
  ['drain time (s)', (f) => f.drain.seconds],
  ['executions reported', (f) => f.drain.executions],
  ['idle: main heap used / total, external (MB)', (f) => memory(f.idle.memory)],
  ['idle: handler workers alive', (f) => f.idle.memory.handlerWorkers],
  [
    `${AFTER_DRAIN_S} s after the drain: main heap used / total, external (MB)`,
    (f) => memory(f.drain.memory),
  ],
  [`${AFTER_DRAIN_S} s after the drain: handler workers alive`, (f) => f.drain.memory.handlerWorkers],
];
function memory(m: MemoryBreakdown): string {
  return `${m.heapUsedMb} / ${m.heapTotalMb}, ${m.externalMb}`;
}
const names = Object.keys(results);
console.log(['figure', ...names].join(' | '));
console.log(['---', ...names.map(() => '---')].join(' | '));
for (const [label, read] of rows)
  console.log([label, ...names.map((n) => String(read(results[n]!)))].join(' | '));
const quoted = results.built ?? results.now;
if (quoted !== undefined && !values['no-write']) {
  const command = `npm run bench:footprint -- --only ${results.built ? 'built --built' : 'now'}`;
  const setting = `${taskCount} tasks, ${results.built ? "the build with the image's NODE_OPTIONS" : 'from source'}`;
  const written = await writeFigures([
    {
      name: 'daemon-idle-rss-mb',
      value: quoted.idle.rssMb,
      unit: 'MB',
      meaning: `the daemon's resident memory idle after ${idleSeconds} s, ${setting}`,
      command,
    },
    {
      name: 'daemon-peak-rss-mb',
      value: quoted.drain.peakRssMb,
      unit: 'MB',
      meaning: `the daemon's peak resident memory draining ${backlog} executions with the limits lifted, ${setting}`,
      command,
    },
  ]);
  console.log(`\nWritten to ${written}: daemon-idle-rss-mb, daemon-peak-rss-mb.`);
}
await rm(CONFIGURATIONS.before!.root, { recursive: true, force: true });
for (const { compileCache } of Object.values(CONFIGURATIONS)) {
  if (compileCache !== undefined) await rm(compileCache, { recursive: true, force: true });
}
