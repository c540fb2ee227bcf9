// Issue 35, item 3: executions the service takes back. The emulator times out every claim the handler outlives
// (a responseTimeout fault rule) and queues the work again, as a new execution or under the same id; the real
// `df-worker start` then meets a 409 for each late report. What a scenario shows: nothing the service holds open
// is left unreported, each refused report is a dead letter once and never sent again, and the copy is claimed
// within seconds of the refusal (not at the next idle poll).
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import type { RequeueMode } from '../../src/emulator/index.ts';
import { budgetFigures, withRig, type BudgetFigures, type FaultRig, type ScenarioFigures } from './rig.ts';

/** The claim's deadline on the service, and how long the handler takes: every first claim outlives it. */
export const RESPONSE_TIMEOUT_MS = 400;
export const HANDLER_MS = 1_200;
/**
 * Executions per mode. Same-id runs one: with several, the poll the first refusal brings forward fills every free
 * slot and may claim again an id whose lapsed run is still reporting; the service then takes that late report
 * as the new claim's (nothing is refused), and a daemon that does not know the id is running runs it twice.
 */
export const EXECUTIONS: Record<RequeueMode, number> = { 'new-execution': 3, 'same-id': 3 };
/** DF_MAX_POLL_INTERVAL_MS of the rig's daemon; at the default month budget the budget's pace (65 s) wins. */
export const IDLE_POLL_MS = 10_000;
/** A copy claimed within this of its refusal counts as "within seconds". */
export const PICKUP_GOAL_MS = 2_000;

export interface RefusedFigures extends ScenarioFigures {
  /** Reports answered 409 (the lapsed claims'). */
  refused: number;
  /** Files in the dead-letter folder, and the distinct executions they name. */
  deadLetters: number;
  /** Every PATCH the daemon sent; each refused one sent once means accepted + refused. */
  reportRequests: number;
  /** Reports the service took. */
  acceptedReports: number;
  /** GETs of an execution (the daemon asks once per refusal whether an earlier attempt was applied). */
  executionGets: number;
  polls: number;
  /** Reports whose output is not what the input determines. */
  wrong: number;
  /**
   * Longest time from a refused report to the claim of its copy, in ms (negative: claimed before the refusal);
   * null when a copy was not claimed before the scenario ended.
   */
  slowestPickupAfterRefusalMs: number | null;
  /** Longest time from a re-queue to the claim of the copy, in ms; null as above. */
  slowestPickupAfterRequeueMs: number | null;
  /** dfworker_reports_refused_total{reason="409_CONFLICT"} on the daemon's /metrics (0 where it has none). */
  countedRefusals: number;
  /** dfworker_redelivered_total on the daemon's /metrics, summed (0 where it has none). */
  countedRedeliveries: number;
}

export interface ResponseTimeoutResult {
  /**
   * The goal: lost 0, wrong 0, duplicated 0, each refusal a dead letter once and sent once, the copies picked up
   * in time. In same-id mode a poll may claim an id again while its lapsed run is still going: the daemon knows
   * it runs (a redelivery, not run again) and the service takes that run's report as the new claim's. A claim
   * taken again may lapse again, so the two counts overlap: at least one of them moved, and every execution has
   * exactly one accepted report.
   */
  completed: boolean;
  mode: RequeueMode;
  figures: RefusedFigures;
  budget: BudgetFigures;
  detail: string;
}

/** Every execution the service still holds open has an accepted report (TIMED_OUT ones are the service's). */
function allOpenReported(rig: FaultRig): boolean {
  return rig.emulator
    .executions()
    .every((e) => e.status === 'TIMED_OUT' || (e.reports.length > 0 && e.status !== 'IN_PROGRESS'));
}

async function deadLetterFiles(rig: FaultRig): Promise<string[]> {
  try {
    return (await readdir(join(rig.stateDir, 'dead-letter'))).filter((f) => !f.startsWith('.'));
  } catch {
    return [];
  }
}

async function counted(url: string): Promise<{ refusals: number; redeliveries: number }> {
  try {
    const text = await (await fetch(`${url}/metrics`)).text();
    const found = /^dfworker_reports_refused_total\{reason="409_CONFLICT"\} (\S+)$/m.exec(text);
    const redeliveries = [...text.matchAll(/^dfworker_redelivered_total\{[^}]*\} (\S+)$/gm)];
    return {
      refusals: found ? Number(found[1]) : 0,
      redeliveries: redeliveries.reduce((sum, m) => sum + Number(m[1]), 0),
    };
  } catch {
    return { refusals: 0, redeliveries: 0 };
  }
}

function figuresOf(
  rig: FaultRig,
  deadLetters: number,
  metrics: { refusals: number; redeliveries: number },
): RefusedFigures {
  const executions = rig.emulator.executions();
  const requests = rig.emulator.requests();
  const reportRequests = requests.filter((r) => r.operation === 'executions.report');
  const refusedAt = new Map<string, number>();
  for (const r of reportRequests) {
    const id = r.path.split('/').at(-1)!;
    if (r.status === 409 && !refusedAt.has(id)) refusedAt.set(id, r.at);
  }
  const byId = new Map(executions.map((e) => [e.id, e]));
  let slowestAfterRefusal = -Infinity;
  let slowestAfterRequeue = -Infinity;
  for (const e of executions) {
    for (const lapse of e.timeouts ?? []) {
      const copy = byId.get(lapse.requeuedAs);
      const claimedAt = copy?.claimedAt === undefined ? Infinity : Date.parse(copy.claimedAt);
      slowestAfterRequeue = Math.max(slowestAfterRequeue, claimedAt - Date.parse(lapse.at));
      const refused = refusedAt.get(e.id);
      if (refused !== undefined) slowestAfterRefusal = Math.max(slowestAfterRefusal, claimedAt - refused);
    }
  }
  let wrong = 0;
  let claimed = 0;
  let reported = 0;
  let duplicated = 0;
  let lost = 0;
  for (const e of executions) {
    if (e.claimedAt !== undefined || (e.timeouts?.length ?? 0) > 0) claimed++;
    if (e.status === 'TIMED_OUT') continue;
    if (e.reports.length === 0) lost++;
    else reported++;
    duplicated += Math.max(0, e.reports.length - 1);
    const expected = rig.expectedOutputOf(e.requeuedFrom ?? e.id);
    for (const report of e.reports) {
      if (report.status !== 'COMPLETED' || !isDeepStrictEqual(report.output, expected)) wrong++;
    }
  }
  return {
    claimed,
    reported,
    duplicated,
    lost,
    refused: reportRequests.filter((r) => r.status === 409).length,
    deadLetters,
    reportRequests: reportRequests.length,
    acceptedReports: reportRequests.filter((r) => r.status === 200).length,
    executionGets: requests.filter((r) => r.operation === 'executions.get').length,
    polls: requests.filter((r) => r.operation === 'tasks.poll').length,
    wrong,
    slowestPickupAfterRefusalMs: Number.isFinite(slowestAfterRefusal)
      ? Math.round(slowestAfterRefusal)
      : null,
    slowestPickupAfterRequeueMs: Number.isFinite(slowestAfterRequeue)
      ? Math.round(slowestAfterRequeue)
      : null,
    countedRefusals: metrics.refusals,
    countedRedeliveries: metrics.redeliveries,
  };
}

/**
 * EXECUTIONS[mode] executions whose handler takes HANDLER_MS, on a task whose first claims of them time out after
 * RESPONSE_TIMEOUT_MS and are queued again (`mode`); the copies run under no timeout. Runs until everything the
 * service holds open is reported, or `timeoutMs`; never throws for a daemon that misses the goal.
 */
export function responseTimeoutScenario(
  mode: RequeueMode,
  options: { timeoutMs?: number } = {},
): Promise<ResponseTimeoutResult> {
  const timeoutMs = options.timeoutMs ?? 20_000;
  const executions = EXECUTIONS[mode];
  return withRig({ env: { DF_MAX_POLL_INTERVAL_MS: String(IDLE_POLL_MS) } }, async (rig) => {
    rig.emulator.setFaults([
      {
        kind: 'responseTimeout',
        taskId: rig.taskId,
        ms: RESPONSE_TIMEOUT_MS,
        requeue: mode,
        count: executions,
      },
    ]);
    rig.enqueue(executions, { delayMs: HANDLER_MS });
    const daemon = rig.start();
    // Every refused report's dead letter written, and everything the service holds open reported.
    const settled = await rig.waitUntil(async () => {
      if (!allOpenReported(rig)) return false;
      const refused = rig.emulator
        .requests()
        .filter((r) => r.operation === 'executions.report' && r.status === 409).length;
      return (await deadLetterFiles(rig)).length >= refused;
    }, timeoutMs);
    const letters = await deadLetterFiles(rig);
    const idlePollSeconds = daemon.logs().find((l) => l.msg === 'df-worker started')?.idlePollIntervalSeconds;
    const metrics = daemon.running ? await counted(daemon.healthUrl()) : { refusals: 0, redeliveries: 0 };
    const figures = figuresOf(rig, new Set(letters).size, metrics);
    const lapsedAccountedFor =
      mode === 'new-execution'
        ? figures.refused === executions
        : figures.refused + figures.countedRedeliveries >= 1 && figures.acceptedReports === executions;
    const completed =
      settled &&
      figures.lost === 0 &&
      figures.wrong === 0 &&
      figures.duplicated === 0 &&
      lapsedAccountedFor &&
      figures.deadLetters === figures.refused &&
      figures.reportRequests === figures.acceptedReports + figures.refused &&
      (figures.refused === 0 ||
        (figures.slowestPickupAfterRefusalMs !== null &&
          figures.slowestPickupAfterRefusalMs <= PICKUP_GOAL_MS));
    const shown = (ms: number | null) => (ms === null ? `(not claimed within ${timeoutMs} ms)` : `${ms} ms`);
    const detail =
      `${mode}: ${figures.refused} report(s) refused (409), ${figures.deadLetters} dead letter(s), ` +
      `${figures.reportRequests} PATCH(es) (${figures.acceptedReports} accepted), ${figures.executionGets} GET(s), ` +
      `${figures.polls} poll(s); copies claimed at most ${shown(figures.slowestPickupAfterRequeueMs)} after ` +
      `their re-queue, ${shown(figures.slowestPickupAfterRefusalMs)} after the refusal; counted on /metrics: ` +
      `${figures.countedRefusals}, redeliveries ${figures.countedRedeliveries}; the daemon's idle poll interval at start: ${String(idlePollSeconds)} s`;
    return { completed, mode, figures, budget: budgetFigures(rig), detail };
  });
}
