// Issue 26's network rows, against the real `df-worker start` and the emulator on loopback at the service's own
// limits (5/s, 50/min): an answer that trickles, a Retry-After of years, poll answers that cannot be used.
import { mulberry32 } from '../../src/replay/workloads.ts';
import type { FaultRule } from '../../src/emulator/index.ts';
import {
  budgetFigures,
  faultWindow,
  figuresOf,
  withRig,
  type BudgetFigures,
  type Daemon,
  type FaultRig,
  type ScenarioFigures,
  type Tally,
} from './rig.ts';
import { TrickleProxy } from './trickle-proxy.ts';

/** The service's limits, in the emulator and in the daemon's budget (DF_BUDGET_SAFETY_MARGIN_MS at its default). */
const SERVICE_LIMITS = { perSecond: 5, perMinute: 50 };
const DAEMON_LIMITS = {
  DF_BUDGET_PER_SECOND: '5',
  DF_BUDGET_PER_MINUTE: '50',
  DF_BUDGET_SAFETY_MARGIN_MS: '200',
  // A month far larger than the test's so that idle polls come every couple of seconds, not every minute.
  DF_BUDGET_PER_MONTH: '5000000',
  DF_MAX_POLL_INTERVAL_MS: '2000',
};
const SLOW_TASK = 'slow-feed';
const SLOW_HANDLER = `import { defineTask } from 'df-worker';
export default defineTask({ key: ${JSON.stringify(SLOW_TASK)}, handle: () => ({}) });
`;

export interface NetworkResult {
  /** False when the scenario's goal was not reached in its time (the figures then say how far it got). */
  completed: boolean;
  figures: ScenarioFigures;
  tally: Tally;
  budget: BudgetFigures;
  detail: string;
}

function resultOf(rig: FaultRig, completed: boolean, detail: string): NetworkResult {
  const tally = rig.tally();
  return { completed, figures: figuresOf(tally), tally, budget: budgetFigures(rig), detail };
}

/** dfworker_poll_answers_lost_total by `task/reason`, as the daemon's /metrics shows it now. */
export async function lostPollAnswers(daemon: Daemon): Promise<Record<string, number>> {
  const text = await (await fetch(`${daemon.healthUrl()}/metrics`)).text();
  const lost: Record<string, number> = {};
  for (const [, labels, value] of text.matchAll(/^dfworker_poll_answers_lost_total\{([^}]*)\} (\S+)$/gm)) {
    const task = /task="([^"]*)"/.exec(labels!)?.[1] ?? '';
    const reason = /reason="([^"]*)"/.exec(labels!)?.[1] ?? '(none)';
    if (Number(value) > 0) lost[`${task}/${reason}`] = Number(value);
  }
  return lost;
}

/**
 * Serves SLOW_TASK beside the workload, its poll answers passed through a TrickleProxy (`gapMs` a byte, or cut
 * after `cutAfterBytes`), and runs `scenario` with the proxy and the URL the daemon must use.
 */
async function withSlowTask<T>(
  rig: FaultRig,
  options: { gapMs: number; cutAfterBytes?: number },
  scenario: (proxy: TrickleProxy, proxyUrl: string) => Promise<T>,
): Promise<T> {
  const slowId = await rig.addTask({ key: SLOW_TASK }, SLOW_HANDLER);
  const proxy = new TrickleProxy({
    target: rig.url,
    ...options,
    trickle: (method, path) => method === 'GET' && path.includes(`/tasks/${slowId}/poll`),
  });
  const proxyUrl = await proxy.listen();
  try {
    return await scenario(proxy, proxyUrl);
  } finally {
    await proxy.close();
  }
}

// Row 1 ───────────────────────────────────────────────────────────────────────────────────────────────────

export interface TrickleResult extends NetworkResult {
  /** Longest time from an execution's arrival to its report, ms. */
  slowestPickupMs: number;
  /** The workload's executions without a report (the trickled claim is the slow task's, and lost by design). */
  workloadLost: number;
  /** Executions of the slow task claimed by a trickled answer and never reported: no client can know their id. */
  trickledClaimsLost: number;
  /** Answers the proxy trickled, and those still trickling when the work was all reported. */
  trickled: number;
  lostAnswers: Record<string, number>;
}

/**
 * One task's poll answers trickle a byte every 400 ms, each gap under the silence limit (its first claims the one
 * execution it has, the later ones say 404), while the workload task's executions arrive at random (Poisson,
 * seeded): they are all picked up and reported, and the trickled claim is counted as a lost answer.
 */
export function trickleBesideWork(
  options: { executions?: number; meanGapMs?: number; seed?: number } = {},
): Promise<TrickleResult> {
  const executions = options.executions ?? 12;
  const meanGapMs = options.meanGapMs ?? 500;
  return withRig({ limits: SERVICE_LIMITS }, async (rig) => {
    return await withSlowTask(rig, { gapMs: 400 }, async (proxy, proxyUrl) => {
      const trickledClaim = rig.emulator.enqueueExecution(SLOW_TASK, {}).id;
      const daemon = rig.start({
        ...DAEMON_LIMITS,
        DF_API_URL: proxyUrl,
        DF_API_BODY_TIMEOUT_MS: '2000',
        DF_API_ANSWER_TIMEOUT_MS: '3000',
      });
      await rig.waitFor(() => proxy.trickling > 0, 'a trickling poll answer');
      const random = mulberry32(options.seed ?? 26);
      const arrivedAt = new Map<string, number>();
      for (let i = 0; i < executions; i++) {
        await faultWindow(-Math.log(1 - random()) * meanGapMs);
        const [id] = rig.enqueue(1);
        arrivedAt.set(id!, Date.now());
      }
      const reported = await rig.waitUntil(
        () => [...arrivedAt.keys()].every((id) => rig.reportsOf(id).length > 0),
        25_000,
      );
      const pickups = [...arrivedAt].map(([id, at]) => {
        const report = rig.reportsOf(id)[0];
        return report ? Date.parse(report.at) - at : Infinity;
      });
      let lostAnswers: Record<string, number> = {};
      const counted = await rig.waitUntil(async () => {
        lostAnswers = await lostPollAnswers(daemon);
        return (lostAnswers[`${SLOW_TASK}/timeout`] ?? 0) > 0;
      }, 5_000);
      await daemon.kill();
      const slowestPickupMs = Math.max(...pickups);
      const workloadLost = [...arrivedAt.keys()].filter((id) => rig.reportsOf(id).length === 0).length;
      return {
        workloadLost,
        trickledClaimsLost: rig.reportsOf(trickledClaim).length === 0 ? 1 : 0,
        ...resultOf(
          rig,
          reported && counted,
          `${executions} executions (Poisson, mean gap ${meanGapMs} ms) beside a poll answer trickling a byte ` +
            `every 400 ms: slowest pickup ${Math.round(slowestPickupMs)} ms, ${proxy.trickled} answers trickled, ` +
            `lost answers ${JSON.stringify(lostAnswers)}`,
        ),
        slowestPickupMs,
        trickled: proxy.trickled,
        lostAnswers,
      };
    });
  });
}

export interface CutAnswersResult extends NetworkResult {
  cut: number;
  readBack: number;
  lostAnswers: Record<string, number>;
}

/**
 * Every poll answer of one task is cut (connection closed) after its first `cutAfterBytes` bytes, which hold the
 * claimed execution's id: each is read back by id and run, and nothing is lost.
 */
export function answersCutAfterTheirId(cutAfterBytes = 120): Promise<CutAnswersResult> {
  return withRig({ limits: SERVICE_LIMITS }, async (rig) => {
    return await withSlowTask(rig, { gapMs: 0, cutAfterBytes }, async (proxy, proxyUrl) => {
      const claims = [1, 2, 3].map(() => rig.emulator.enqueueExecution(SLOW_TASK, {}).id);
      const ids = [...rig.enqueue(3), ...claims];
      const daemon = rig.start({ ...DAEMON_LIMITS, DF_API_URL: proxyUrl });
      const reported = await rig.waitUntil(() => ids.every((id) => rig.reportsOf(id).length > 0), 20_000);
      const lostAnswers = await lostPollAnswers(daemon);
      await daemon.terminate();
      const readBack = daemon
        .logs()
        .filter((l) => l.msg === 'poll answer cut short; its execution was read back by id and runs').length;
      return {
        ...resultOf(
          rig,
          reported,
          `${proxy.trickled} poll answers cut after ${cutAfterBytes} bytes, ${readBack} executions read back by ` +
            `id and run; lost answers ${JSON.stringify(lostAnswers)}`,
        ),
        cut: proxy.trickled,
        readBack,
        lostAnswers,
      };
    });
  });
}

export interface SigtermResult extends NetworkResult {
  exitCode: number | null;
  elapsedMs: number;
  /** DF_SHUTDOWN_GRACE_MS plus the reports' flush window: the documented bound. */
  boundMs: number;
  lostLogged: boolean;
}

/** SIGTERM while a poll answer trickles (DF_API_ANSWER_TIMEOUT_MS at its default, a minute): the bound holds. */
export function sigtermDuringTrickle(): Promise<SigtermResult> {
  const graceMs = 1_000;
  return withRig({ limits: SERVICE_LIMITS }, async (rig) => {
    return await withSlowTask(rig, { gapMs: 400 }, async (proxy, proxyUrl) => {
      const daemon = rig.start({
        ...DAEMON_LIMITS,
        DF_API_URL: proxyUrl,
        DF_API_BODY_TIMEOUT_MS: '2000',
        DF_SHUTDOWN_GRACE_MS: String(graceMs),
      });
      await rig.waitFor(() => proxy.trickling > 0, 'a trickling poll answer');
      const boundMs = graceMs + Math.max(5_000, graceMs / 2);
      // A daemon that does not honour SIGTERM is killed 20 s past the bound (the issue saw none in 120 s).
      const terminated = daemon.terminate();
      const overdue = setTimeout(() => daemon.cli.child.kill('SIGKILL'), boundMs + 20_000);
      const { code, elapsedMs } = await terminated.finally(() => clearTimeout(overdue));
      const lostLogged = daemon
        .logs()
        .some((l) => l.reason === 'shutdown' && String(l.msg).startsWith('poll answer lost'));
      return {
        ...resultOf(
          rig,
          code === 0 && elapsedMs < boundMs + 3_000,
          `SIGTERM during a trickle: exit ${code} after ${elapsedMs} ms (bound ${boundMs} ms)`,
        ),
        exitCode: code,
        elapsedMs,
        boundMs,
        lostLogged,
      };
    });
  });
}

// Row 2 ───────────────────────────────────────────────────────────────────────────────────────────────────

export interface HostileRetryAfterResult extends NetworkResult {
  retryAfter: string;
  /** From the 429 to the next request the service received, ms. */
  nextRequestAfterMs: number;
  /** The daemon's one log line for the pause. */
  pauseLogs: Record<string, unknown>[];
  overflowWarnings: number;
  exitCode: number | null;
  stopMs: number;
}

/** The first poll is answered 429 with `retryAfter`; the pause is cut to DF_RETRY_AFTER_MAX_MS and work goes on. */
export function hostileRetryAfter(retryAfter: string, maxMs = 2_000): Promise<HostileRetryAfterResult> {
  return withRig({ limits: SERVICE_LIMITS }, async (rig) => {
    const rule: FaultRule = {
      operation: 'tasks.poll',
      kind: 'status',
      status: 429,
      headers: { 'retry-after': retryAfter },
      count: 1,
    };
    rig.emulator.setFaults([rule]);
    const ids = rig.enqueue(6);
    const daemon = rig.start({ ...DAEMON_LIMITS, DF_RETRY_AFTER_MAX_MS: String(maxMs) });
    const reported = await rig.waitUntil(() => ids.every((id) => rig.reportsOf(id).length > 0), 15_000);
    const terminated = daemon.terminate();
    // The bound of a stop with nothing running is a second or so; a daemon that overruns it is killed.
    const overdue = setTimeout(() => daemon.cli.child.kill('SIGKILL'), 30_000);
    const { code, elapsedMs } = await terminated.finally(() => clearTimeout(overdue));
    const requests = rig.emulator.requests();
    const limited = requests.find((r) => r.status === 429);
    const next = limited && requests.find((r) => r.at > limited.at);
    const pauseLogs = daemon.logs().filter((l) => l.msg === 'the service answered 429 RATE_LIMIT');
    const overflowWarnings = (daemon.cli.stderr().match(/TimeoutOverflowWarning/g) ?? []).length;
    const nextRequestAfterMs = limited && next ? next.at - limited.at : Infinity;
    return {
      ...resultOf(
        rig,
        reported,
        `Retry-After ${retryAfter}: next request ${nextRequestAfterMs} ms after the 429, ` +
          `${pauseLogs.length} pause log line(s), ${overflowWarnings} overflow warnings, stop ${elapsedMs} ms`,
      ),
      retryAfter,
      nextRequestAfterMs,
      pauseLogs,
      overflowWarnings,
      exitCode: code,
      stopMs: elapsedMs,
    };
  });
}

// Row 10 ──────────────────────────────────────────────────────────────────────────────────────────────────

export interface UnusableAnswersResult extends NetworkResult {
  lostAnswers: Record<string, number>;
}

/** Two poll answers the daemon cannot use (an HTML 200, JSON without an id), then the real ones. */
export function unusablePollAnswers(): Promise<UnusableAnswersResult> {
  return withRig({ limits: SERVICE_LIMITS }, async (rig) => {
    rig.emulator.setFaults([
      {
        operation: 'tasks.poll',
        kind: 'status',
        status: 200,
        contentType: 'text/html',
        body: '<html><body>Sign in</body></html>',
        count: 1,
      },
      {
        operation: 'tasks.poll',
        kind: 'status',
        status: 200,
        body: JSON.stringify({ object: 'task_execution', status: 'IN_PROGRESS', input: {} }),
        count: 1,
      },
    ]);
    const ids = rig.enqueue(4);
    const daemon = rig.start(DAEMON_LIMITS);
    const reported = await rig.waitUntil(() => ids.every((id) => rig.reportsOf(id).length > 0), 15_000);
    let lostAnswers: Record<string, number> = {};
    const counted = await rig.waitUntil(async () => {
      lostAnswers = await lostPollAnswers(daemon);
      return Object.keys(lostAnswers).length >= 2;
    }, 5_000);
    await daemon.terminate();
    return {
      ...resultOf(rig, reported && counted, `unusable poll answers counted: ${JSON.stringify(lostAnswers)}`),
      lostAnswers,
    };
  });
}

export interface NetworkScenario {
  name: string;
  run: () => Promise<NetworkResult>;
}

/** Issue 26's network rows, for bench/faults-report.ts. */
export const NETWORK_SCENARIOS: NetworkScenario[] = [
  { name: '26.1 a poll answer trickles beside work', run: () => trickleBesideWork() },
  { name: '26.1 SIGTERM while an answer trickles', run: () => sigtermDuringTrickle() },
  { name: '26.1 poll answers cut after their id', run: () => answersCutAfterTheirId() },
  { name: '26.2 Retry-After: 1000000000', run: () => hostileRetryAfter('1000000000') },
  { name: '26.2 Retry-After: 2147484', run: () => hostileRetryAfter('2147484') },
  { name: '26.2 Retry-After: a date in 2099', run: () => hostileRetryAfter('Thu, 01 Jan 2099 00:00:00 GMT') },
  { name: '26.7 poll answers without id / not JSON', run: () => unusablePollAnswers() },
];
