// Issue 26, item 3: handler memory under the default configuration. A handler builds big strings past its
// heap limit, holds 50 MB Buffers off the V8 heap, or returns a 60 MB output, next to six innocent executions,
// against the real `df-worker start` under a supervisor, the service's limits (5/s, 50/min) and, where this
// machine allows one, a memory cgroup as a container's limit. Each scenario returns its figures whatever the
// daemon does; handler-memory.test.ts asserts the issue's goals on them.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FaultyTask } from './handler-sources.ts';
import type { Issue26Scenario } from './issue-26-scenarios.ts';
import { memoryCgroup, type MemoryCgroup } from './handler-memory-cgroup.ts';
import {
  perMonthForIdleInterval,
  withHandlerFaults,
  type ExecutionFate,
  type HandlerFaultResult,
  type HandlerRigSetup,
  type IsolationMode,
} from './handler-rig.ts';
import { budgetFigures, type BudgetFigures } from './rig.ts';

/** Each task is polled at least this often while idle: 2 tasks, 40 polls a minute, under the key's 50. */
const IDLE_POLL_MS = 3_000;
/** The innocent executions queued beside the bad one, one every INNOCENT_EVERY_MS. */
export const INNOCENTS = 6;
const INNOCENT_EVERY_MS = 300;
/** The chart's memory limit (helm/df-worker/values.yaml resources.limits.memory). */
export const CONTAINER_LIMIT_MB = 512;

export interface MemoryRowOptions {
  /** DF_HANDLER_ISOLATION; undefined: the daemon's default. */
  isolation?: IsolationMode;
  /** Run without the memory cgroup even where one can be made. */
  noCgroup?: boolean;
}

export interface MemoryRowResult extends HandlerFaultResult {
  budget: BudgetFigures;
  bad: ExecutionFate;
  innocents: ExecutionFate[];
  /** DF_HANDLER_MEMORY_MB of the row. */
  memoryMb: number;
  /** The cgroup's limit and the OOM kills the kernel made in it; undefined where none could be made. */
  cgroup: { limitMb: number; oomKills: number } | undefined;
  /** Why there was no cgroup. */
  cgroupUnavailable?: string;
}

interface Row {
  task: (runsFile: string) => FaultyTask;
  memoryMb: number;
  /** The container's memory limit the row runs in (a memory cgroup), in MB; none: no cgroup. */
  containerMb?: number;
  /** Fails the row where no cgroup can be made: what it shows needs the kernel's limit. */
  needsCgroup?: boolean;
}

/** The service's limits, and the daemon's budget set to them. */
const LIMITS = { perSecond: 5, perMinute: 50 };

async function runMemoryRow(row: Row, options: MemoryRowOptions): Promise<MemoryRowResult> {
  const workDir = await mkdtemp(join(tmpdir(), 'df-worker-memory-'));
  let cgroup: MemoryCgroup | undefined;
  let cgroupUnavailable: string | undefined;
  if (!options.noCgroup && row.containerMb !== undefined) {
    const made = await memoryCgroup(row.containerMb, workDir);
    if ('unavailable' in made) cgroupUnavailable = made.unavailable;
    else cgroup = made;
  }
  try {
    if (row.needsCgroup && cgroup === undefined) {
      throw new Error(`this row needs a memory cgroup: ${cgroupUnavailable ?? 'none was asked for'}`);
    }
    const result = await withHandlerFaults(setupOf(row, options, cgroup), async (h) => {
      await h.start();
      const bad = h.enqueueFaulty(row.task('').key);
      h.startSteadyWork({ everyMs: INNOCENT_EVERY_MS, count: INNOCENTS });
      await h.rig.waitUntil(
        () =>
          h.supervisor.gaveUp ||
          (h.reported(bad) &&
            h.healthyIds.length === INNOCENTS &&
            h.healthyIds.every((id) => h.reported(id))),
        25_000,
      );
      const responsive = await h.wrapUp();
      return {
        ...h.result({ responsive }),
        budget: budgetFigures(h.rig),
        bad: await h.fate(bad),
        innocents: await Promise.all(h.healthyIds.map((id) => h.fate(id))),
      };
    });
    return {
      ...result,
      memoryMb: row.memoryMb,
      cgroup: cgroup && { limitMb: cgroup.limitMb, oomKills: await cgroup.oomKills() },
      ...(cgroupUnavailable === undefined ? {} : { cgroupUnavailable }),
    };
  } finally {
    await cgroup?.remove();
    await rm(workDir, { recursive: true, force: true });
  }
}

/** The rig's set-up of a row: its faulty task, the service's limits, and the cgroup for every daemon started. */
function setupOf(row: Row, options: MemoryRowOptions, cgroup: MemoryCgroup | undefined): HandlerRigSetup {
  return {
    ...(options.isolation === undefined ? {} : { isolation: options.isolation }),
    faulty: (rig) => [row.task(rig.runsFile)],
    limits: LIMITS,
    pacedPolls: false,
    maxRestarts: 3,
    env: {
      DF_HANDLER_MEMORY_MB: String(row.memoryMb),
      DF_BUDGET_PER_SECOND: String(LIMITS.perSecond),
      DF_BUDGET_PER_MINUTE: String(LIMITS.perMinute),
      // The emulator stamps arrivals in the test process, which shares 2 cores with the daemon and its handler
      // processes: the margin keeps its 1 s and 60 s windows from seeing the daemon's a little shifted.
      DF_BUDGET_SAFETY_MARGIN_MS: '500',
      DF_BUDGET_PER_MONTH: String(perMonthForIdleInterval(IDLE_POLL_MS, 2)),
      DF_MAX_POLL_INTERVAL_MS: String(IDLE_POLL_MS),
      // Every daemon the supervisor starts, restarts included, joins the cgroup.
      ...(cgroup ? { NODE_OPTIONS: cgroup.nodeOptions } : {}),
    },
  };
}

function task(key: string, outputKeys: string[], runsFile: string, handle: string): FaultyTask {
  const source = `
import { appendFileSync } from 'node:fs';
import { defineTask } from 'df-worker';

export default defineTask({
  key: ${JSON.stringify(key)},
  outputKeys: ${JSON.stringify(outputKeys)},
  handle: async (_input, ctx) => {
    appendFileSync(${JSON.stringify(runsFile)}, ctx.execution.id + '\\n');
    ${handle}
  },
});
`;
  return { key, inputKeys: [], outputKeys, source };
}

/**
 * Row 1: a handler builds big strings (String.replace of 8 MB, kept) past its heap limit. In a worker thread
 * V8 aborts the whole process on this allocation ("Reached heap limit"), not only the thread. No cgroup: the
 * heap limit is what must contain it (on the code before, a memory cgroup of 1 GB or less made Node.js size
 * V8's heaps so that the thread happened to be contained).
 */
export function bigStringsHandler(options: MemoryRowOptions = {}): Promise<MemoryRowResult> {
  return runMemoryRow(
    {
      memoryMb: 64,
      task: (runsFile) =>
        task(
          'big-strings',
          ['never'],
          runsFile,
          `const source = 'x'.repeat(8_000_000);
    const kept = [];
    for (;;) kept.push(source.replace(/x/g, 'yz'));`,
        ),
    },
    options,
  );
}

/**
 * Row 2: a handler holds 50 MB Buffers (off the V8 heap), 16 of them if nothing stops it (800 MB), past
 * DF_HANDLER_MEMORY_MB=128, within the container's 512 MB.
 */
export function bigBuffersHandler(options: MemoryRowOptions = {}): Promise<MemoryRowResult> {
  return runMemoryRow({ memoryMb: 128, containerMb: CONTAINER_LIMIT_MB, task: buffersTask }, options);
}

/**
 * Row 2 at the container's limit: the same Buffers with DF_HANDLER_MEMORY_MB above the container's memory
 * (2048 MB in 512), so that the kernel's OOM killer, not the daemon's watch, ends the handler: it must pick the
 * handler's process, never the daemon. Needs the memory cgroup.
 */
export function bigBuffersAtContainerLimit(options: MemoryRowOptions = {}): Promise<MemoryRowResult> {
  return runMemoryRow(
    { memoryMb: 2_048, containerMb: CONTAINER_LIMIT_MB, task: buffersTask, needsCgroup: true },
    options,
  );
}

function buffersTask(runsFile: string): FaultyTask {
  return task(
    'big-buffers',
    ['held'],
    runsFile,
    `const held = [];
    for (let i = 0; i < 16; i++) {
      // Filled, so that every page is resident.
      held.push(Buffer.alloc(50_000_000, i + 1));
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    return { held: held.length };`,
  );
}

/** Row 3: a handler returns a 60 MB output, DF_HANDLER_MEMORY_MB at its default (512) in a 512 MB container. */
export function bigOutputHandler(options: MemoryRowOptions = {}): Promise<MemoryRowResult> {
  return runMemoryRow(
    {
      memoryMb: 512,
      containerMb: CONTAINER_LIMIT_MB,
      task: (runsFile) =>
        task('big-output', ['blob'], runsFile, `return { blob: 'x'.repeat(60 * 2 ** 20) };`),
    },
    options,
  );
}

function describeFate(fate: ExecutionFate): string {
  const reports =
    fate.reports.length === 0
      ? 'not reported'
      : fate.reports
          .map((r) => (r.error === undefined ? r.status : `${r.status} (${r.error.slice(0, 100)})`))
          .join(', then ');
  return `${reports}, ${fate.runs} run(s)`;
}

/**
 * The row's goal: the daemon never died nor restarted, nothing lost, no 429, at most 5/s and 50/min; the bad
 * execution ran once and was reported FAILED once with `message`; each innocent ran once, COMPLETED once, right.
 */
export function contained(r: MemoryRowResult, message: RegExp): boolean {
  const { liveness } = r.figures;
  return (
    liveness.unexpectedExits === 0 &&
    liveness.restarts === 0 &&
    liveness.responsive &&
    r.figures.lost === 0 &&
    r.tally.wrong === 0 &&
    r.budget.rateLimited === 0 &&
    r.budget.maxPerSecond <= LIMITS.perSecond &&
    r.budget.maxPerMinute <= LIMITS.perMinute &&
    r.bad.runs === 1 &&
    r.bad.reports.length === 1 &&
    r.bad.reports[0]!.status === 'FAILED' &&
    message.test(r.bad.reports[0]!.error ?? '') &&
    r.innocents.length === INNOCENTS &&
    r.innocents.every((e) => e.runs === 1 && e.reports.length === 1 && e.reports[0]!.status === 'COMPLETED')
  );
}

/** What the bad execution's FAILED report says when memory is contained. */
export const OUT_OF_MEMORY = /ran out of memory.*DF_HANDLER_MEMORY_MB/;
export const OUTPUT_TOO_LARGE = /output limit \(DF_HANDLER_MAX_OUTPUT_BYTES\)/;

function entry(
  name: string,
  scenario: (options: MemoryRowOptions) => Promise<MemoryRowResult>,
  message: RegExp,
): Issue26Scenario {
  return {
    name,
    run: async () => {
      const r = await scenario({});
      const innocentsOk = r.innocents.filter(
        (e) => e.runs === 1 && e.reports.length === 1 && e.reports[0]!.status === 'COMPLETED',
      ).length;
      const where = r.cgroup
        ? `${r.cgroup.limitMb} MB cgroup, ${r.cgroup.oomKills} OOM kill(s)`
        : `no cgroup (${r.cgroupUnavailable ?? 'none for this row'})`;
      return {
        completed: contained(r, message),
        figures: r.figures,
        tally: r.tally,
        budget: r.budget,
        detail:
          `bad: ${describeFate(r.bad)}; innocents run and COMPLETED once: ${innocentsOk}/${r.innocents.length}; ` +
          `daemon exits ${r.figures.liveness.unexpectedExits}; ${where}`,
      };
    },
  };
}

/** Issue 26's handler-memory rows for bench/faults-report.ts, under the daemon's default configuration. */
export const HANDLER_MEMORY_SCENARIOS: Issue26Scenario[] = [
  entry('26.3 handler builds big strings past its heap limit', bigStringsHandler, OUT_OF_MEMORY),
  entry('26.3 handler holds 50 MB Buffers past DF_HANDLER_MEMORY_MB', bigBuffersHandler, OUT_OF_MEMORY),
  entry(
    '26.3 handler holds 50 MB Buffers past the container limit',
    bigBuffersAtContainerLimit,
    OUT_OF_MEMORY,
  ),
  entry('26.3 handler returns a 60 MB output', bigOutputHandler, OUTPUT_TOO_LARGE),
];
