// A handler process's memory as the kernel sees it (Linux /proc and the memory cgroup): what the pool's watch
// reads, the OOM score that makes the kernel end a handler process rather than the daemon, and the cgroup's
// count of OOM kills that tells a worker the kernel killed from one that died otherwise. Elsewhere (no /proc)
// every reading is undefined and the pool relies on the V8 heap limit alone.
import { readFileSync, writeFileSync } from 'node:fs';

/**
 * The oom_score_adj of handler processes: the most a process may raise its own score, so that when the
 * container's memory limit is reached the kernel ends a handler process (whichever one is largest), never the
 * daemon, whose journal and budget windows every execution depends on.
 */
export const HANDLER_OOM_SCORE_ADJ = 1000;

/** Raises the OOM score of process `pid` (a handler process just forked); false where the kernel has none. */
export function raiseOomScore(pid: number | undefined): boolean {
  if (pid === undefined) return false;
  try {
    writeFileSync(`/proc/${pid}/oom_score_adj`, String(HANDLER_OOM_SCORE_ADJ));
    return true;
  } catch {
    return false;
  }
}

/**
 * The process's anonymous resident memory in MB (RssAnon: its V8 heap, Buffers, native allocations; not the
 * `node` binary's pages, which it shares with the daemon), or undefined when it cannot be read.
 */
export function anonymousResidentMb(pid: number): number | undefined {
  try {
    const match = /^RssAnon:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match ? Number(match[1]) / 1024 : undefined;
  } catch {
    return undefined;
  }
}

/**
 * How many processes the kernel's OOM killer ended in this process's memory cgroup (cgroup v2 memory.events,
 * v1 memory.oom_control), or undefined when there is no such count to read. Handler processes share the
 * daemon's cgroup, so a rise while a worker ran, and its death by SIGKILL, mean the container's limit ended it.
 */
export function oomKillCount(): number | undefined {
  try {
    const cgroups = readFileSync('/proc/self/cgroup', 'utf8');
    const v1 = /^\d+:(?:[^:]*,)?memory(?:,[^:]*)?:(.*)$/m.exec(cgroups)?.[1];
    const file =
      v1 === undefined
        ? `/sys/fs/cgroup${cgroupPath(/^0::(.*)$/m.exec(cgroups)?.[1])}/memory.events`
        : `/sys/fs/cgroup/memory${cgroupPath(v1)}/memory.oom_control`;
    const match = /^oom_kill (\d+)$/m.exec(readFileSync(file, 'utf8'));
    return match ? Number(match[1]) : undefined;
  } catch {
    return undefined;
  }
}

function cgroupPath(path: string | undefined): string {
  if (path === undefined) throw new Error('no memory cgroup');
  return path === '/' ? '' : path;
}
