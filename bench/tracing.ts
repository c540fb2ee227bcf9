// What tracing costs the daemon (`df-worker start` as a child process, 20 handler modules and 20 tasks, the
// emulator on loopback). Tracing off: start to first poll and idle RSS of this checkout beside --baseline-ref
// (the commit before tracing), same set-up for both (each its own compile cache, the first start cold), runs
// interleaved so that the machine's drift falls on both alike. Tracing on: a backlog drained with the service's
// limits lifted, tracing off and on (spans to a sink collector in this process), ms per execution and peak RSS.
//   node --conditions=df-worker-source bench/tracing.ts [--runs 5 --idle-s 10 --backlog 1000 --drains 3
//     --baseline-ref 2ea0195]   (--runs 0: the drains only)
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Emulator } from '../src/emulator/index.ts';

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '5' },
    'idle-s': { type: 'string', default: '10' },
    backlog: { type: 'string', default: '1000' },
    drains: { type: 'string', default: '3' },
    'baseline-ref': { type: 'string', default: '2ea0195' },
  },
});
const RUNS = Number(values.runs);
const IDLE_S = Number(values['idle-s']);
const BACKLOG = Number(values.backlog);
const DRAINS = Number(values.drains);
const TASKS = 20;
const root = fileURLToPath(new URL('..', import.meta.url));

interface Configuration {
  root: string;
  compileCache: string;
  env: Record<string, string>;
}

async function baseline(ref: string): Promise<string> {
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

/** A collector that takes every export and counts its spans. */
async function sink(): Promise<{ url: string; spans: () => number; close: () => Promise<void> }> {
  let spans = 0;
  const server = http.createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
        resourceSpans?: { scopeSpans?: { spans?: unknown[] }[] }[];
      };
      for (const r of body.resourceSpans ?? [])
        for (const s of r.scopeSpans ?? []) spans += s.spans?.length ?? 0;
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    spans: () => spans,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

interface Daemon {
  child: ChildProcess;
  emulator: Emulator;
  keys: string[];
  spawnedAt: number;
  close(): Promise<void>;
}

async function startDaemon(configuration: Configuration, limitsLifted: boolean): Promise<Daemon> {
  const dir = await mkdtemp(join(tmpdir(), 'df-worker-bench-tracing-'));
  await mkdir(join(dir, 'handlers'));
  const keys = Array.from({ length: TASKS }, (_, i) => `task-${String(i).padStart(2, '0')}`);
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
  const spawnedAt = Date.now();
  const child = spawn(
    process.execPath,
    ['--conditions=df-worker-source', join(configuration.root, 'src/cli/main.ts'), 'start'],
    {
      env: {
        PATH: process.env.PATH ?? '',
        NODE_COMPILE_CACHE: configuration.compileCache,
        DF_API_URL: url,
        DF_API_KEY: 'bench',
        DF_HANDLERS_DIR: join(dir, 'handlers'),
        DF_STATE_DIR: join(dir, 'state'),
        DF_HTTP_PORT: '0',
        DF_HTTP_HOST: '127.0.0.1',
        DF_LOG_LEVEL: 'warn',
        ...(limitsLifted
          ? {
              DF_BUDGET_PER_SECOND: '1000000',
              DF_BUDGET_PER_MINUTE: '10000000',
              DF_BUDGET_PER_MONTH: '100000000',
            }
          : {}),
        ...configuration.env,
      },
      stdio: ['ignore', 'ignore', 'inherit'],
    },
  );
  return {
    child,
    emulator,
    keys,
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

async function rssMb(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024;
}

/** RSS of `pid` and every process under it (its handler processes), in MB. */
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
  let total = 0;
  for (const member of parents.keys()) {
    let p: number | undefined = member;
    while (p !== undefined && p > 1 && p !== pid) p = parents.get(p);
    if (p !== pid) continue;
    total += await rssMb(member).catch(() => 0);
  }
  return total;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const round = (x: number, digits = 0) => Math.round(x * 10 ** digits) / 10 ** digits;

// Tracing off: before and now, interleaved.
const off: Record<string, Configuration> = {
  before: {
    root: await baseline(values['baseline-ref']),
    compileCache: await mkdtemp(join(tmpdir(), 'cc-')),
    env: {},
  },
  now: { root, compileCache: await mkdtemp(join(tmpdir(), 'cc-')), env: {} },
};
const starts: Record<string, number[]> = { before: [], now: [] };
const idle: Record<string, number[]> = { before: [], now: [] };
for (let run = 0; run < RUNS; run++) {
  for (const [name, configuration] of run % 2 === 0 ? Object.entries(off) : Object.entries(off).reverse()) {
    const daemon = await startDaemon(configuration, false);
    starts[name]!.push(await firstPoll(daemon));
    await sleep(IDLE_S * 1000);
    idle[name]!.push(round(await rssMb(daemon.child.pid!), 1));
    await daemon.close();
    console.error(
      `tracing off, ${name}, run ${run + 1}: first poll ${starts[name]!.at(-1)} ms, idle ${idle[name]!.at(-1)} MB`,
    );
  }
}
if (RUNS > 0) {
  console.log(
    `tracing off (${RUNS} runs each, interleaved; the first start of each has an empty compile cache)`,
  );
  console.log('figure | before | now');
  console.log('--- | --- | ---');
  console.log(
    `start to first poll, each run (ms) | ${starts.before!.join(', ')} | ${starts.now!.join(', ')}`,
  );
  console.log(
    `start to first poll, median of runs 2-${RUNS} (ms) | ${median(starts.before!.slice(1))} | ${median(starts.now!.slice(1))}`,
  );
  console.log(
    `idle RSS after ${IDLE_S} s, each run (MB) | ${idle.before!.join(', ')} | ${idle.now!.join(', ')}`,
  );
  console.log(`idle RSS, median (MB) | ${median(idle.before!)} | ${median(idle.now!)}`);
}

// Tracing on: a backlog drained, off and on, interleaved.
const collector = await sink();
const drains: Record<string, { ms: number; peak: number; tree: number; spans: number }[]> = {
  off: [],
  on: [],
};
const modes: Record<string, Configuration> = {
  off: off.now!,
  on: { ...off.now!, env: { OTEL_EXPORTER_OTLP_ENDPOINT: collector.url } },
};
for (let run = 0; run < DRAINS; run++) {
  for (const [name, configuration] of run % 2 === 0
    ? Object.entries(modes)
    : Object.entries(modes).reverse()) {
    const spansBefore = collector.spans();
    const daemon = await startDaemon(configuration, true);
    await firstPoll(daemon);
    await sleep(1_000);
    for (let i = 0; i < BACKLOG; i++) daemon.emulator.enqueueExecution(daemon.keys[i % TASKS]!, { n: i });
    const started = Date.now();
    let peak = 0;
    let tree = 0;
    while (!daemon.emulator.executions().every((e) => e.reports.length > 0)) {
      peak = Math.max(peak, await rssMb(daemon.child.pid!));
      tree = Math.max(tree, await treeRssMb(daemon.child.pid!));
      await sleep(100);
    }
    const ms = Date.now() - started;
    await daemon.close();
    drains[name]!.push({ ms, peak: round(peak), tree: round(tree), spans: collector.spans() - spansBefore });
    console.error(`drain ${name}, run ${run + 1}: ${JSON.stringify(drains[name]!.at(-1))}`);
  }
}
await collector.close();
console.log(`\ndraining ${BACKLOG} executions, limits lifted (${DRAINS} runs each, interleaved)`);
console.log('figure | tracing off | tracing on');
console.log('--- | --- | ---');
const each = (name: string, read: (d: { ms: number; peak: number; tree: number; spans: number }) => number) =>
  drains[name]!.map(read).join(', ');
console.log(
  `ms per execution, each run | ${each('off', (d) => round(d.ms / BACKLOG, 2))} | ${each('on', (d) => round(d.ms / BACKLOG, 2))}`,
);
console.log(`peak RSS of the daemon (MB) | ${each('off', (d) => d.peak)} | ${each('on', (d) => d.peak)}`);
console.log(
  `peak RSS with handler processes (MB) | ${each('off', (d) => d.tree)} | ${each('on', (d) => d.tree)}`,
);
console.log(`spans received | ${each('off', (d) => d.spans)} | ${each('on', (d) => d.spans)}`);
for (const configuration of Object.values(off))
  await rm(configuration.compileCache, { recursive: true, force: true });
await rm(off.before!.root, { recursive: true, force: true });
