// Issue 36's row "a handler that spawns a child process (attached, and detached) and outlives its 3 s timeout",
// against the real `df-worker start`: each child appends a timestamped line to a file every 200 ms; after the
// FAILED report no line may follow, and neither child may be left alive.
import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Issue36OnceResult } from './issue-36-once-scenarios.ts';
import { budgetFigures, figuresOf, withRig } from './rig.ts';

export type ChildIsolation = 'process' | 'thread';

const TASK = 'spawner';
/** The handler's time limit, as in the issue's row. */
const TIMEOUT_MS = 3_000;
/** How long after the FAILED report the children's file is watched, in ms. */
const WATCH_MS = 1_500;

function spawnerSource(sideFile: string, pidFile: string): string {
  const loop =
    `const fs = require('node:fs'); const label = process.argv[1];` +
    `fs.appendFileSync(${JSON.stringify(pidFile)}, label + ' ' + process.pid + '\\n');` +
    `setInterval(() => fs.appendFileSync(${JSON.stringify(sideFile)}, label + ' ' + Date.now() + '\\n'), 200);`;
  return `import { spawn } from 'node:child_process';
import { defineTask } from 'df-worker';
const LOOP = ${JSON.stringify(loop)};
export default defineTask({
  key: ${JSON.stringify(TASK)},
  timeoutMs: ${TIMEOUT_MS},
  handle: () => {
    spawn(process.execPath, ['-e', LOOP, 'attached'], { stdio: 'ignore' });
    spawn(process.execPath, ['-e', LOOP, 'detached'], { stdio: 'ignore', detached: true }).unref();
    // Outlives its time limit: it does not listen to ctx.signal.
    return new Promise(() => {});
  },
});
`;
}

/** True while `pid` runs (a zombie has ended). */
function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !/^[ZX]$/.test(stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3));
  } catch {
    return false;
  }
}

/** The children's lines after the FAILED report, and whether they are alive then and after the daemon exits. */
export async function handlerChildrenOutliveTimeout(isolation: ChildIsolation): Promise<Issue36OnceResult> {
  return withRig(
    { limits: { perSecond: 5, perMinute: 50 }, env: { DF_HANDLER_ISOLATION: isolation } },
    async (rig) => {
      const sideFile = join(rig.dir, 'side-effects.log');
      const pidFile = join(rig.dir, 'children.pid');
      await rig.addTask({ key: TASK }, spawnerSource(sideFile, pidFile));
      const daemon = rig.start({
        DF_BUDGET_PER_SECOND: '5',
        DF_BUDGET_PER_MINUTE: '50',
        DF_BUDGET_SAFETY_MARGIN_MS: '200',
        DF_BUDGET_PER_MONTH: '5000000',
        DF_MAX_POLL_INTERVAL_MS: '300',
      });
      await rig.started(daemon);
      const { id } = rig.emulator.enqueueExecution(TASK, {});
      const reported = await rig.waitUntil(() => rig.reportsOf(id).length > 0, 15_000);
      const report = rig.reportsOf(id)[0];
      const reportedAt = report ? Date.parse(report.at) : Infinity;
      await new Promise((resolve) => setTimeout(resolve, WATCH_MS));
      const pids = (await readFile(pidFile, 'utf8').catch(() => ''))
        .split('\n')
        .filter(Boolean)
        .map((line) => Number(line.split(' ')[1]));
      const aliveAfterReport = pids.filter(alive).length;
      await daemon.terminate();
      const aliveAfterExit = pids.filter(alive);
      // Not left behind for the next test, whatever the daemon did.
      for (const pid of aliveAfterExit) process.kill(pid, 'SIGKILL');
      const lines = (await readFile(sideFile, 'utf8').catch(() => '')).split('\n').filter(Boolean);
      const after = (label: string) =>
        lines.filter((line) => line.startsWith(`${label} `) && Number(line.split(' ')[1]) > reportedAt)
          .length;
      const linesAfter = { attached: after('attached'), detached: after('detached') };
      const tally = rig.tally();
      const completed =
        reported &&
        report?.status === 'FAILED' &&
        pids.length === 2 &&
        linesAfter.attached === 0 &&
        linesAfter.detached === 0 &&
        aliveAfterReport === 0 &&
        aliveAfterExit.length === 0;
      return {
        completed,
        figures: figuresOf(tally),
        tally,
        budget: budgetFigures(rig),
        detail:
          `${isolation} isolation: report ${report?.status ?? 'none'}; children started ${pids.length}; lines after ` +
          `the report: attached ${linesAfter.attached}, detached ${linesAfter.detached} in ${WATCH_MS} ms; alive ` +
          `after the report ${aliveAfterReport}, after the daemon exited ${aliveAfterExit.length}`,
        linesAfterReport: linesAfter.attached + linesAfter.detached,
        aliveAfterExit: aliveAfterExit.length,
      };
    },
  );
}
