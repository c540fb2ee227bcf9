// A memory cgroup for a fault scenario's daemons, as a container's memory limit is: created under the test
// process's own memory cgroup (cgroup v2 or v1; root on Linux), joined by each daemon before its first module
// loads (NODE_OPTIONS --import, which its handler processes inherit), removed afterwards. Where no cgroup can
// be made, memoryCgroup() says why and the scenario runs without the limit.
import { mkdir, readFile, rmdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { faultWindow } from './rig.ts';

export interface MemoryCgroup {
  limitMb: number;
  /** NODE_OPTIONS that make a process join the cgroup before anything else runs in it. */
  nodeOptions: string;
  /** Processes the kernel's OOM killer ended in the cgroup so far. */
  oomKills(): Promise<number>;
  /** Kills whatever is left in the cgroup (only processes of the scenario join it) and removes it. */
  remove(): Promise<void>;
}

interface Layout {
  dir: string;
  limitFile: string;
  eventsFile: string;
}

let created = 0;

/** A new cgroup limited to `limitMb`, its join module written into `workDir`; or why none can be made. */
export async function memoryCgroup(
  limitMb: number,
  workDir: string,
): Promise<MemoryCgroup | { unavailable: string }> {
  let layout: Layout;
  try {
    layout = await ownLayout(`df-worker-test-${process.pid}-${++created}`);
    await mkdir(layout.dir);
  } catch (error) {
    return { unavailable: `no memory cgroup can be created here: ${(error as Error).message}` };
  }
  const procs = join(layout.dir, 'cgroup.procs');
  try {
    await writeFile(join(layout.dir, layout.limitFile), String(limitMb * 2 ** 20));
    // No swap: past the limit the kernel must reclaim or kill, as in a container without swap.
    await writeFile(join(layout.dir, 'memory.swap.max'), '0').catch(() => undefined);
  } catch (error) {
    await rmdir(layout.dir).catch(() => undefined);
    return { unavailable: `the memory cgroup cannot be limited: ${(error as Error).message}` };
  }
  const joinModule = join(workDir, 'join-memory-cgroup.mjs');
  await writeFile(
    joinModule,
    `import { writeFileSync } from 'node:fs';\nwriteFileSync(${JSON.stringify(procs)}, String(process.pid));\n`,
  );
  return {
    limitMb,
    nodeOptions: `--import=${pathToFileURL(joinModule).href}`,
    oomKills: async () =>
      Number(/^oom_kill (\d+)$/m.exec(await readFile(join(layout.dir, layout.eventsFile), 'utf8'))?.[1] ?? 0),
    remove: async () => {
      for (let i = 0; i < 100; i++) {
        const pids = (await readFile(procs, 'utf8')).split('\n').filter((line) => line !== '');
        if (pids.length === 0) break;
        for (const pid of pids) {
          try {
            process.kill(Number(pid), 'SIGKILL');
          } catch {
            // Already gone.
          }
        }
        await faultWindow(50);
      }
      await rmdir(layout.dir);
    },
  };
}

/** Where a child of this process's memory cgroup goes, and its files, for cgroup v2 or v1. */
async function ownLayout(name: string): Promise<Layout> {
  const cgroups = await readFile('/proc/self/cgroup', 'utf8');
  const v1 = /^\d+:(?:[^:]*,)?memory(?:,[^:]*)?:(.*)$/m.exec(cgroups)?.[1];
  if (v1 !== undefined) {
    return {
      dir: join('/sys/fs/cgroup/memory', v1, name),
      limitFile: 'memory.limit_in_bytes',
      eventsFile: 'memory.oom_control',
    };
  }
  const v2 = /^0::(.*)$/m.exec(cgroups)?.[1];
  if (v2 === undefined) throw new Error('this process is in no memory cgroup');
  // A v2 cgroup holding processes cannot give its children controllers: its sibling is made instead.
  return {
    dir: join('/sys/fs/cgroup', v2 === '/' ? '' : join(v2, '..'), name),
    limitFile: 'memory.max',
    eventsFile: 'memory.events',
  };
}
