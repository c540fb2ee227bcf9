// Resource use of the real daemon (`df-worker start` as a child process) against the emulator on loopback, with
// 20 handler modules and 20 tasks: time from spawn to the first poll, resident memory and CPU while idle, then
// peak resident memory draining a backlog with the service's limits lifted (the daemon's own, and with its
// handler processes), and what is left once the handler workers were idle past DF_HANDLER_IDLE_TIMEOUT_MS.
// Each figure is printed beside the baseline measured in the same run: the daemon's code at --baseline-ref
// (before the footprint work by default), each configuration in a fresh emulator and process, the
// configurations' runs interleaved so that the machine's drift falls on all alike. A checkout whose
// src/cli/main.ts enables Node's compile cache gets its own cache folder, empty at its first start, as `now`
// does; an older one runs without (the variable alone would turn the cache on); the table says which.
//   npm run bench:footprint [-- --idle-s 30 --backlog 3000 --starts 5 --baseline-ref face1c1 --try 'DF_X=1 DF_Y=2' --built]
// --root DIR adds another checkout as configuration `root`. --idle-only measures only idle resident memory, a
// fresh daemon per start (the quick check that a change adds nothing to the idle daemon), e.g.
//   npm run bench:footprint -- --idle-only --only now --starts 3 --idle-s 15 --tasks 1
// With --snapshot DIR, each daemon writes a heap snapshot of its main thread after the idle phase and after the
// drain, into DIR/<configuration> (node --heapsnapshot-signal, through NODE_OPTIONS).
// The daemon's idle and peak resident memory (of `built` with --built, else of `now`) are written to
// bench/figures.json, which the guides quote through `npm run docs`; --no-write leaves it alone.
import { spawnSync, type ChildProcess } from 'node:child_process';
import { mkdir, rm } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { writeFigures } from '../src/docs/figures.ts';
import {
  checkOutBaseline,
  compileCacheFolder,
  drainBacklog,
  enablesCompileCache,
  firstPoll,
  interleaved,
  median,
  ROOT,
  sample,
  startDaemon,
  watch,
  type DaemonConfiguration,
  type StartOptions,
} from './daemon-process.ts';

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
    root: { type: 'string' },
    'idle-only': { type: 'boolean', default: false },
    'no-write': { type: 'boolean', default: false },
  },
});
const idleSeconds = Number(values['idle-s']);
const backlog = Number(values.backlog);
const taskCount = Number(values.tasks);
const DRAIN_LIMIT_S = 240;

const AFTER_DRAIN_S = 35;
const STARTS = Math.max(2, Number(values.starts));

/** A configuration compared, and what its table column says of its compile cache. */
interface Compared {
  configuration: DaemonConfiguration;
  compileCache: string;
}

/** A checkout's code, with a compile cache exactly as `now` has one if its main.ts enables the cache itself. */
async function checkoutConfiguration(root: string): Promise<Compared> {
  if (await enablesCompileCache(root)) {
    return {
      configuration: { root, env: {}, compileCache: await compileCacheFolder() },
      compileCache: 'own folder, empty at the first start',
    };
  }
  return { configuration: { root, env: {} }, compileCache: 'none (its main.ts does not enable it)' };
}

const baseline = await checkOutBaseline(values['baseline-ref']);
/** The configurations compared: the code at --baseline-ref, and this checkout's defaults. */
const CONFIGURATIONS: Record<string, Compared> = {
  before: await checkoutConfiguration(baseline.root),
  now: await checkoutConfiguration(ROOT),
};
if (values.root !== undefined) CONFIGURATIONS.root = await checkoutConfiguration(resolve(values.root));

interface Figures {
  /** The first start, with an empty compile cache (a fresh container), then the median of the others. */
  firstPollMs: { cold: number; warm: number };
  idle: Idle;
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

interface Idle {
  seconds: number;
  rssMb: number;
  cpuPercent: number;
  memory: MemoryBreakdown;
}

/** Where the resident memory is, as the daemon's /metrics says (main thread only for the heap figures). */
interface MemoryBreakdown {
  heapUsedMb: number;
  heapTotalMb: number;
  externalMb: number;
  handlerWorkers: number;
}

function startOptions(name: string, limitsLifted: boolean): StartOptions {
  return {
    tasks: taskCount,
    limitsLifted,
    env:
      values.snapshot === undefined
        ? {}
        : { NODE_OPTIONS: `--heapsnapshot-signal=SIGUSR2 --diagnostic-dir=${join(values.snapshot, name)}` },
  };
}

/** Idle: the service's default limits and budget, as deployed; nothing to do for the tasks. */
async function measureIdle(name: string, configuration: DaemonConfiguration): Promise<Idle> {
  const idler = await startDaemon(configuration, startOptions(name, false));
  await firstPoll(idler);
  await sleep(3_000); // the first round of polls and the start-up garbage settle
  const idle = await watch(idler.child.pid!, idleSeconds);
  const memory = await breakdown(idler.metricsUrl);
  await snapshot(idler.child, name, 'idle');
  await idler.close();
  return { seconds: idle.seconds, rssMb: idle.rssMbEnd, cpuPercent: idle.cpuPercent, memory };
}

/** Draining: the service's limits and the budget lifted, so only the daemon sets the pace. */
async function measureDrain(name: string, configuration: DaemonConfiguration): Promise<Figures['drain']> {
  const drainer = await startDaemon(configuration, startOptions(name, true));
  const drain = await drainBacklog(drainer, backlog, DRAIN_LIMIT_S);
  const settled = await sample(drainer.child.pid!);
  await sleep(AFTER_DRAIN_S * 1000);
  const after = await sample(drainer.child.pid!);
  const memory = await breakdown(drainer.metricsUrl);
  await snapshot(drainer.child, name, 'drained');
  const reported = drainer.emulator.executions().filter((e) => e.reports.length > 0).length;
  await drainer.close();
  return {
    executions: reported,
    seconds: drain.seconds,
    peakRssMb: drain.rssMbMax,
    peakTreeRssMb: drain.treeRssMbMax,
    rssMbDrained: Math.round(settled.rssMb),
    rssMbAfter: Math.round(after.rssMb),
    cpuPercent: drain.cpuPercent,
    memory,
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

async function snapshot(child: ChildProcess, name: string, label: string): Promise<void> {
  if (values.snapshot === undefined) return;
  child.kill('SIGUSR2');
  await sleep(4_000);
  console.error(`${name}: heap snapshot after ${label} written to ${join(values.snapshot, name)}`);
}

// --try 'DF_X=1 DF_Y=2' adds a configuration, for trying a setting beside the two above.
if (values.built) {
  const build = spawnSync('npm', ['run', '-s', 'build'], { cwd: ROOT, stdio: 'inherit' });
  if (build.status !== 0) throw new Error('npm run build failed');
  // With the image's NODE_OPTIONS (see Dockerfile).
  CONFIGURATIONS.built = {
    configuration: {
      root: ROOT,
      env: { NODE_OPTIONS: '--max-semi-space-size=2' },
      compileCache: await compileCacheFolder(),
      built: true,
    },
    compileCache: CONFIGURATIONS.now!.compileCache,
  };
}
// With --built, a trial runs the build too, with the image's NODE_OPTIONS unless it sets its own.
for (const [i, assignments] of (values.try ?? []).entries()) {
  const env = Object.fromEntries(
    assignments.split(/\s+/).map((a) => [a.slice(0, a.indexOf('=')), a.slice(a.indexOf('=') + 1)]),
  );
  const compileCache = await compileCacheFolder();
  CONFIGURATIONS[`try ${i + 1}`] = {
    configuration: values.built
      ? {
          root: ROOT,
          compileCache,
          env: { ...CONFIGURATIONS.built!.configuration.env, ...env },
          built: true,
        }
      : { root: ROOT, compileCache, env },
    compileCache: CONFIGURATIONS.now!.compileCache,
  };
}
const names = Object.keys(CONFIGURATIONS).filter(
  (name) => values.only === undefined || values.only.split(',').includes(name),
);
if (values.snapshot !== undefined) {
  for (const name of names) await mkdir(join(values.snapshot, name), { recursive: true });
}
const configurationOf = (name: string) => CONFIGURATIONS[name]!.configuration;
const table = (rows: Array<[string, (name: string) => number | string]>) => {
  console.log(['figure', ...names].join(' | '));
  console.log(['---', ...names.map(() => '---')].join(' | '));
  for (const [label, read] of [
    ['compile cache', (name: string) => CONFIGURATIONS[name]!.compileCache] as const,
    ...rows,
  ])
    console.log([label, ...names.map((name) => String(read(name)))].join(' | '));
};

if (values['idle-only']) {
  const idle: Record<string, number[]> = Object.fromEntries(names.map((name) => [name, []]));
  for (let run = 0; run < STARTS; run++) {
    for (const name of interleaved(names, run)) {
      idle[name]!.push((await measureIdle(name, configurationOf(name))).rssMb);
      console.error(`${name}, start ${run + 1}: idle ${idle[name]!.at(-1)} MB`);
    }
  }
  table([
    [`idle RSS, ${taskCount} tasks, after ${idleSeconds} s, each start (MB)`, (n) => idle[n]!.join(', ')],
    [`idle RSS, median of ${STARTS} starts (MB)`, (n) => median(idle[n]!)],
  ]);
} else {
  // Start to first poll, on a first start (an empty compile cache) and then as the median of a few more starts
  // (it varies from start to start with the disk cache and what the other core does).
  const starts: Record<string, number[]> = Object.fromEntries(names.map((name) => [name, []]));
  for (let run = 0; run < STARTS; run++) {
    for (const name of interleaved(names, run)) {
      const daemon = await startDaemon(configurationOf(name), startOptions(name, false));
      starts[name]!.push(await firstPoll(daemon));
      await daemon.close();
    }
  }
  const idle: Record<string, Idle> = {};
  for (const name of interleaved(names, 0)) idle[name] = await measureIdle(name, configurationOf(name));
  const results: Record<string, Figures> = {};
  for (const name of interleaved(names, 1)) {
    const drain = await measureDrain(name, configurationOf(name));
    const firstPollMs = { cold: starts[name]![0]!, warm: median(starts[name]!.slice(1)) };
    results[name] = { firstPollMs, idle: idle[name]!, drain };
  }
  for (const name of names) console.error(`${name}: ${JSON.stringify(results[name])}`);
  await printAndWrite(results);
}
await baseline.remove();
for (const { configuration } of Object.values(CONFIGURATIONS)) {
  if (configuration.compileCache !== undefined)
    await rm(configuration.compileCache, { recursive: true, force: true });
}

async function printAndWrite(results: Record<string, Figures>): Promise<void> {
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
  table(rows.map(([label, read]) => [label, (name) => read(results[name]!)]));
  const quoted = results.built ?? results.now;
  if (quoted === undefined || values['no-write']) return;
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

function memory(m: MemoryBreakdown): string {
  return `${m.heapUsedMb} / ${m.heapTotalMb}, ${m.externalMb}`;
}
