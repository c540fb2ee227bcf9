// The real daemon (`df-worker start`) as a child process against the emulator on loopback, for the benches that
// measure it (footprint, tracing): a baseline checked out from git, a configuration started, the first poll
// timed, resident memory and CPU read from /proc, a backlog drained with the peak of the process tree.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { Emulator } from '../src/emulator/index.ts';

/** This checkout. */
export const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** Clock ticks per second of /proc/<pid>/stat's CPU times (USER_HZ). */
const TICKS_PER_SECOND = 100;

/** One way of running the daemon. */
export interface DaemonConfiguration {
  /** The checkout whose src/cli/main.ts (or dist/cli/main.js) runs. */
  root: string;
  /** Set on top of the bench's environment, last. */
  env: Record<string, string>;
  /**
   * Node's compile cache folder for this configuration's starts (NODE_COMPILE_CACHE), empty at its first start
   * as in a fresh container; none leaves the variable unset (which alone would turn the cache on).
   */
  compileCache?: string;
  /** Runs dist/cli/main.js (the image's entry point) instead of the sources. */
  built?: boolean;
}

/** A commit's daemon code, checked out to a temp folder. */
export interface Baseline {
  root: string;
  /** Its src/cli/main.ts turns Node's compile cache on itself, as the daemon does now. */
  enablesCompileCache: boolean;
  remove(): Promise<void>;
}

/**
 * The daemon's code at `ref`, with `git archive` into a temp folder beside this checkout's node_modules (the
 * devDependencies keep what older code imported).
 */
export async function checkOutBaseline(ref: string): Promise<Baseline> {
  const folder = await mkdtemp(join(tmpdir(), 'df-worker-baseline-'));
  const archive = spawnSync(
    'git',
    ['-C', ROOT, 'archive', '--format=tar', ref, 'src', 'config', 'package.json'],
    { maxBuffer: 256 * 2 ** 20 },
  );
  if (archive.status !== 0) throw new Error(`git archive ${ref} failed: ${archive.stderr.toString()}`);
  const untar = spawnSync('tar', ['-x', '-C', folder], { input: archive.stdout });
  if (untar.status !== 0) throw new Error(`tar failed: ${untar.stderr.toString()}`);
  await symlink(join(ROOT, 'node_modules'), join(folder, 'node_modules'));
  return {
    root: folder,
    enablesCompileCache: await enablesCompileCache(folder),
    remove: () => rm(folder, { recursive: true, force: true }),
  };
}

/** Whether the checkout at `root` calls module.enableCompileCache() at start. */
export async function enablesCompileCache(root: string): Promise<boolean> {
  const main = await readFile(join(root, 'src/cli/main.ts'), 'utf8').catch(() => '');
  return /enableCompileCache\(/.test(main);
}

/** An empty folder for a configuration's NODE_COMPILE_CACHE. */
export function compileCacheFolder(): Promise<string> {
  return mkdtemp(join(tmpdir(), 'df-worker-compile-cache-'));
}

export interface StartOptions {
  /** Handler modules and tasks (task-00, task-01, …). */
  tasks: number;
  /** The service's limits and the daemon's budget lifted, so that only the daemon sets the pace. */
  limitsLifted: boolean;
  /** Set before the configuration's own env (NODE_OPTIONS for heap snapshots, say). */
  env?: Record<string, string>;
}

export interface Daemon {
  child: ChildProcess;
  emulator: Emulator;
  keys: string[];
  metricsUrl: string;
  spawnedAt: number;
  close(): Promise<void>;
}

/** A fresh emulator with `tasks` tasks, and the daemon started against it with a handler module for each. */
export async function startDaemon(
  configuration: DaemonConfiguration,
  options: StartOptions,
): Promise<Daemon> {
  const dir = await mkdtemp(join(tmpdir(), 'df-worker-bench-'));
  await mkdir(join(dir, 'handlers'));
  const keys = Array.from({ length: options.tasks }, (_, i) => `task-${String(i).padStart(2, '0')}`);
  for (const key of keys) {
    await writeFile(
      join(dir, 'handlers', `${key}.ts`),
      `import { defineTask } from 'df-worker';\nexport default defineTask({ key: '${key}', inputKeys: ['n'], outputKeys: ['n2'], handle: (i: { n: number }) => ({ n2: i.n * 2 }) });\n`,
    );
  }
  const emulator = new Emulator({
    apiKeys: ['bench'],
    ...(options.limitsLifted
      ? { limits: { perSecond: Infinity, perMinute: Infinity, perMonth: Infinity } }
      : {}),
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
  const spawnedAt = Date.now();
  const child = spawn(
    process.execPath,
    configuration.built
      ? [join(configuration.root, 'dist/cli/main.js'), 'start']
      : ['--conditions=df-worker-source', join(configuration.root, 'src/cli/main.ts'), 'start'],
    {
      env: {
        PATH: process.env.PATH ?? '',
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
        ...(options.limitsLifted
          ? {
              DF_BUDGET_PER_SECOND: '1000000',
              DF_BUDGET_PER_MINUTE: '10000000',
              DF_BUDGET_PER_MONTH: '100000000',
            }
          : {}),
        ...options.env,
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

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** Milliseconds from spawn to the daemon's first poll of the emulator. */
export async function firstPoll(daemon: Daemon): Promise<number> {
  const poll = () => daemon.emulator.requests().find((r) => r.operation === 'tasks.poll');
  while (!poll()) {
    if (daemon.child.exitCode !== null) throw new Error(`the daemon exited with ${daemon.child.exitCode}`);
    await sleep(2);
  }
  return poll()!.at - daemon.spawnedAt;
}

/** Resident memory (MB) and CPU time so far (ticks) of one process. */
export async function sample(pid: number): Promise<{ rssMb: number; cpuTicks: number }> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const rssKb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
  const stat = (await readFile(`/proc/${pid}/stat`, 'utf8')).split(') ')[1]!.split(' ');
  return { rssMb: rssKb / 1024, cpuTicks: Number(stat[11]) + Number(stat[12]) };
}

/** Resident memory of `pid` and every process under it (its handler processes), in MB. */
export async function treeRssMb(pid: number): Promise<number> {
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
    total += await sample(member).then(
      (s) => s.rssMb,
      () => 0, // gone since readdir
    );
  }
  return total;
}

export interface Phase {
  ms: number;
  /** To a tenth of a second. */
  seconds: number;
  rssMbEnd: number;
  rssMbMax: number;
  /** With its handler processes; sampled only while `until` is given. */
  treeRssMbMax: number;
  cpuPercent: number;
}

/**
 * Watches the daemon for `seconds`, or until `until()` holds: its resident memory every 500 ms (every 100 ms with
 * the tree's while waiting on `until`), and the CPU it used.
 */
export async function watch(pid: number, seconds: number, until?: () => boolean): Promise<Phase> {
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
  const ms = Date.now() - started;
  return {
    ms,
    seconds: Math.round(ms / 100) / 10,
    rssMbEnd: Math.round(last.rssMb),
    rssMbMax: Math.round(maxRss),
    treeRssMbMax: Math.round(maxTreeRss),
    cpuPercent:
      Math.round(((last.cpuTicks - first.cpuTicks) / TICKS_PER_SECOND / (ms / 1000)) * 10_000) / 100,
  };
}

/**
 * Once the daemon polled and settled for a second, `backlog` executions spread over its tasks, watched until
 * every one is reported (or `limitSeconds` passed).
 */
export async function drainBacklog(daemon: Daemon, backlog: number, limitSeconds: number): Promise<Phase> {
  await firstPoll(daemon);
  await sleep(1_000);
  const { emulator, keys } = daemon;
  for (let i = 0; i < backlog; i++) emulator.enqueueExecution(keys[i % keys.length]!, { n: i });
  return watch(daemon.child.pid!, limitSeconds, () =>
    emulator.executions().every((e) => e.reports.length > 0),
  );
}

/** `names` in order on even runs, reversed on odd ones, so that the machine's drift falls on all alike. */
export function interleaved<T>(names: T[], run: number): T[] {
  return run % 2 === 0 ? names : [...names].reverse();
}

export const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
