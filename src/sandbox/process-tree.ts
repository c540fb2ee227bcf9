// The processes a handler worker started, found and ended together: a worker process leads its own process
// group (forked detached), and every process it or its thread starts inherits a tag in its environment, so that a
// descendant that left the group (`detached: true`, setsid, a double fork) is still found through /proc. Ending
// them is SIGTERM, then SIGKILL to those still there after GROUP_END_BOUND_MS. Elsewhere than Linux (no /proc)
// only the process group is ended.
import { readdir, readFile } from 'node:fs/promises';

// Not an ESM import: its namespace would read node:crypto's lazy webcrypto (see telemetry/http-server.ts).
const { randomBytes } = process.getBuiltinModule('node:crypto');

/** The environment variable whose value tags every process a handler worker started (inherited). */
export const PROCESS_TAG_VARIABLE = 'DFWORKER_HANDLER_TAG';
/** How long processes have after SIGTERM before SIGKILL, in ms. */
export const GROUP_END_BOUND_MS = 500;
/** How often the processes are looked for while they have to go, in ms. */
const GONE_CHECK_MS = 20;
/** Rounds of look, end, look again: a process forked while the others were ended is caught by the next. */
const END_ROUNDS = 3;

/** A new tag for one worker's processes. */
export function newProcessTag(): string {
  return randomBytes(12).toString('hex');
}

export interface ProcessTree {
  /** The tag in the environment of every process the worker started. */
  tag: string;
  /** The worker process's pid (it leads its group); undefined for a thread, whose group is the daemon's. */
  leader?: number | undefined;
}

interface ProcessInfo {
  pid: number;
  ppid: number;
  pgid: number;
  zombie: boolean;
}

/**
 * The live processes of `tree` but `keep` and this process: the leader's group, any tagged process, and the
 * descendants of each. Empty where /proc cannot be read.
 */
export async function findTreeProcesses(tree: ProcessTree, keep: readonly number[] = []): Promise<number[]> {
  const all = await listProcesses();
  if (all === undefined) return [];
  const found = new Set<number>();
  const live = all.filter((info) => !info.zombie);
  const tagged = await Promise.all(live.map((info) => isTagged(info.pid, tree.tag)));
  live.forEach((info, i) => {
    if ((tree.leader !== undefined && info.pgid === tree.leader) || tagged[i]) found.add(info.pid);
  });
  // Descendants by parent links, until no new one: those that cleared their environment but kept their parent.
  for (let grew = true; grew;) {
    grew = false;
    for (const info of all) {
      if (!info.zombie && !found.has(info.pid) && found.has(info.ppid)) {
        found.add(info.pid);
        grew = true;
      }
    }
  }
  found.delete(process.pid);
  for (const pid of keep) found.delete(pid);
  return [...found];
}

/**
 * Ends every process of `tree` but `keep`: SIGTERM, then SIGKILL after `boundMs` to any still there, looked for
 * again until none is left (at most END_ROUNDS rounds). Resolves with how many were signalled.
 */
export async function endTreeProcesses(
  tree: ProcessTree,
  options: { keep?: readonly number[]; boundMs?: number } = {},
): Promise<number> {
  const keep = options.keep ?? [];
  const boundMs = options.boundMs ?? GROUP_END_BOUND_MS;
  const group = tree.leader !== undefined && !keep.includes(tree.leader) ? tree.leader : undefined;
  if ((await listProcesses()) === undefined) {
    // No /proc: the group alone can be found and ended.
    if (group === undefined || !signal(-group, 'SIGTERM')) return 0;
    await waitUntil(() => Promise.resolve(!signal(-group, 0)), boundMs);
    signal(-group, 'SIGKILL');
    return 1;
  }
  let signalled = 0;
  for (let round = 0; round < END_ROUNDS; round++) {
    const pids = await findTreeProcesses(tree, keep);
    if (pids.length === 0) break;
    for (const pid of pids) signal(pid, 'SIGTERM');
    signalled += pids.length;
    await waitUntil(async () => (await findTreeProcesses(tree, keep)).length === 0, boundMs);
    for (const pid of await findTreeProcesses(tree, keep)) signal(pid, 'SIGKILL');
  }
  return signalled;
}

async function waitUntil(done: () => Promise<boolean>, boundMs: number): Promise<void> {
  const deadline = performance.now() + boundMs;
  while (!(await done()) && performance.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, GONE_CHECK_MS));
  }
}

function signal(pid: number, name: NodeJS.Signals | 0): boolean {
  try {
    process.kill(pid, name);
    return true;
  } catch {
    // Gone already (ESRCH), or not ours to signal (EPERM): nothing more to do with it.
    return false;
  }
}

/** Read without blocking the daemon's event loop: a scan of 140 processes takes about 15 ms of reads. */
async function listProcesses(): Promise<ProcessInfo[] | undefined> {
  let names: string[];
  try {
    names = await readdir('/proc');
  } catch {
    return undefined;
  }
  const infos = await Promise.all(
    names.filter((name) => /^\d+$/.test(name)).map((name) => readStat(Number(name))),
  );
  return infos.filter((info) => info !== undefined);
}

/** /proc/<pid>/stat: `pid (comm) state ppid pgrp ...`; comm may hold spaces and parentheses. */
async function readStat(pid: number): Promise<ProcessInfo | undefined> {
  try {
    const text = await readFile(`/proc/${pid}/stat`, 'utf8');
    const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return {
      pid,
      zombie: fields[0] === 'Z' || fields[0] === 'X',
      ppid: Number(fields[1]),
      pgid: Number(fields[2]),
    };
  } catch {
    return undefined;
  }
}

async function isTagged(pid: number, tag: string): Promise<boolean> {
  try {
    return (await readFile(`/proc/${pid}/environ`)).includes(`${PROCESS_TAG_VARIABLE}=${tag}\0`);
  } catch {
    return false;
  }
}
