// Issue 36's row "the execution being run delivered again by a poll (the service re-queued it)", against the
// real `df-worker start` and the emulator on loopback at the service's limits: the next two polls of the task are
// answered with one execution, so the second hands it out while its handler still runs.
import type { Issue36OnceResult } from './issue-36-once-scenarios.ts';
import { budgetFigures, figuresOf, withRig, type Daemon } from './rig.ts';

const DAEMON_LIMITS = {
  DF_BUDGET_PER_SECOND: '5',
  DF_BUDGET_PER_MINUTE: '50',
  DF_BUDGET_SAFETY_MARGIN_MS: '200',
  // A month far larger than the test's so that the task is polled every few hundred ms while its handler runs.
  DF_BUDGET_PER_MONTH: '5000000',
  DF_MAX_POLL_INTERVAL_MS: '300',
};
/** How long the handler runs: long enough for polls to come while it does. */
const HANDLER_MS = 2_000;
const REDELIVERED_LOG =
  'a poll handed out again an execution this worker still owes a report for (the service re-queued it): ' +
  'it is not run again; the claim in hand reports it once';

/** dfworker_redelivered_total summed over its labels, as the daemon's /metrics shows it now. */
export async function redeliveredCount(daemon: Daemon): Promise<number> {
  const text = await (await fetch(`${daemon.healthUrl()}/metrics`)).text();
  let total = 0;
  for (const [, value] of text.matchAll(/^dfworker_redelivered_total\{[^}]*\} (\S+)$/gm))
    total += Number(value);
  return total;
}

/** The service hands out the execution being run a second time; it runs once and is reported once. */
export async function redeliveredWhileRunning(): Promise<Issue36OnceResult> {
  return withRig({ limits: { perSecond: 5, perMinute: 50 }, env: DAEMON_LIMITS }, async (rig) => {
    const [id] = rig.enqueue(1, { delayMs: HANDLER_MS }) as [string];
    // Claimed here, then handed to the daemon by its next two polls: the second while the handler runs.
    const answer = await rig.claimOutOfBand(rig.taskId);
    rig.emulator.setFaults([
      {
        operation: 'tasks.poll',
        taskId: rig.taskId,
        kind: 'status',
        status: 200,
        body: JSON.stringify(answer),
        contentType: 'application/json',
        count: 2,
      },
    ]);
    const daemon = rig.start();
    await rig.started(daemon);
    const reported = await rig.waitUntil(() => rig.reportsOf(id).length > 0, 15_000);
    // Both answers given, and a second report (had one gone out) would have had time to arrive.
    const handedOut = rig.emulator
      .requests()
      .filter((r) => r.path.endsWith(`/tasks/${rig.taskId}/poll`) && r.status === 200).length;
    await rig.waitUntil(() => rig.reportsOf(id).length > 1, 1_500);
    const runs = (await rig.runs()).get(id) ?? 0;
    const counted = await redeliveredCount(daemon);
    const logged = daemon
      .logs()
      .filter((line) => line.msg === REDELIVERED_LOG && line.executionId === id).length;
    const journalErrors = daemon
      .logs()
      .filter((line) => line.msg === 'could not journal the outcome; reporting it anyway').length;
    const reports = rig.reportsOf(id).length;
    await daemon.terminate();
    const tally = rig.tally();
    const completed =
      reported && handedOut >= 2 && runs === 1 && reports === 1 && counted === 1 && logged === 1;
    return {
      completed,
      figures: figuresOf(tally),
      tally,
      budget: budgetFigures(rig),
      detail:
        `handed out ${handedOut} times; handler runs ${runs}; reports ${reports}; ` +
        `dfworker_redelivered_total ${counted}; logged ${logged}; outcome journal errors ${journalErrors}`,
      runs,
      reports,
    };
  });
}
