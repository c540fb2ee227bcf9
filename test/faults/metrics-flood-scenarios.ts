// Issue 26, item 6: the metrics port cannot starve the daemon. The real `df-worker start`, at the service's
// limits (5/s, 50/min), drains queued work while a separate process floods its /metrics and /healthz; a
// kubelet-like prober times /healthz on fresh connections on the probe port (DF_HTTP_PROBE_PORT, as the chart
// sets it), and another on the flooded port, the baseline. The scenario returns the report rate before and
// during the flood, measured on the same daemon in the same run.
import { spawn } from 'node:child_process';
import { request } from 'node:http';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { RequestRecord } from '../../src/emulator/index.ts';
import type { FloodFigures, FloodOptions } from './metrics-flood-client.ts';
import {
  budgetFigures,
  figuresOf,
  withRig,
  type BudgetFigures,
  type FaultRig,
  type ScenarioFigures,
  type Tally,
} from './rig.ts';

const FLOOD_CLIENT = fileURLToPath(new URL('./metrics-flood-client.ts', import.meta.url));
/** The service's default limits, on the emulator and in the daemon's budget. */
const LIMITS = { perSecond: 5, perMinute: 50 };
/** Kubelet's default probe timeout is 1 s: a /healthz slower than that is a failed probe. */
const PROBE_TIMEOUT_MS = 1_000;
const PROBE_EVERY_MS = 100;

export interface MetricsFloodOptions {
  /** Flooding clients, half on /metrics, half on /healthz. */
  clients: number;
  /** How long the flood lasts, ms. */
  floodMs: number;
  /** Hostile sockets besides: slowloris, silent, oversized headers (see metrics-flood-client.ts). */
  slowloris?: number;
  silent?: number;
  hugeHeaders?: number;
  /** DF_* settings of the daemon on top of the rig's. */
  env?: Record<string, string>;
}

/** Probes of /healthz as the kubelet sends them, every 100 ms during the flood, each on a new connection. */
export interface ProbeFigures {
  sent: number;
  /** Not answered 200 within 1 s (refused, reset, timed out or another status). */
  failed: number;
  /** The most failures in a row: kubelet restarts the container after failureThreshold (3 by default). */
  longestFailureRun: number;
  /** Slowest probe answered 200. */
  slowestMs: number;
  /** The longest event-loop lag the daemon's /healthz reported (its longest of the last recovery window). */
  maxEventLoopLagMs: number;
  /** Probes by outcome: the status code, or the error (ECONNRESET, timeout...). */
  outcomes: Record<string, number>;
}

export interface MetricsFloodResult {
  figures: ScenarioFigures;
  tally: Tally;
  budget: BudgetFigures;
  /** Reports per second before the flood (from the 2nd report to the 10th). */
  unfloodedRate: number;
  /** Reports per second under the flood (from its start to the 20th report, or to its end). */
  floodedRate: number;
  /** Kubelet-like probes of /healthz on the probe port during the flood. */
  probes: ProbeFigures;
  /**
   * The same probes on the flooded port at the same time: the baseline, not bounded (they wait in its accept
   * queue behind the flood's reconnecting clients, for as long as the machine takes to accept them).
   */
  floodedPortProbes: ProbeFigures;
  flood: FloodFigures;
  daemonRunning: boolean;
}

/** The emulator's clock time of each accepted report, in order. */
function reportTimes(rig: FaultRig): number[] {
  const isReport = (r: RequestRecord) => r.operation === 'executions.report' && r.status < 300;
  return rig.emulator
    .requests()
    .filter(isReport)
    .map((r) => r.at);
}

/**
 * A kubelet-style probe: a new connection, `Connection: close`, kubelet's default 1 s timeout for the whole
 * probe (not between its bytes: an answer whose bytes trickle in within a second of each other still fails).
 */
function probe(url: string): Promise<{ outcome: string; ms: number; lagMs?: number }> {
  const startedAt = performance.now();
  return new Promise((resolve) => {
    let timer: NodeJS.Timeout | undefined = undefined;
    const done = (outcome: string, lagMs?: number) => {
      clearTimeout(timer);
      resolve({ outcome, ms: performance.now() - startedAt, ...(lagMs === undefined ? {} : { lagMs }) });
    };
    const req = request(`${url}/healthz`, { agent: false, headers: { connection: 'close' } }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (text: string) => (body += text));
      res.on('end', () => {
        const lagMs = (JSON.parse(body || '{}') as { eventLoopLagMs?: number }).eventLoopLagMs;
        done(String(res.statusCode), lagMs);
      });
      res.on('error', () => done('aborted'));
    });
    timer = setTimeout(() => req.destroy(new Error('timeout')), PROBE_TIMEOUT_MS);
    req.on('error', (error: NodeJS.ErrnoException) => done(error.code ?? error.message));
    req.end();
  });
}

async function probeUntil(url: string, stop: Promise<unknown>): Promise<ProbeFigures> {
  const result: ProbeFigures = {
    sent: 0,
    failed: 0,
    longestFailureRun: 0,
    slowestMs: 0,
    maxEventLoopLagMs: 0,
    outcomes: {},
  };
  let stopped = false;
  let run = 0;
  void stop.then(() => (stopped = true));
  while (!stopped) {
    const next = new Promise((resolve) => setTimeout(resolve, PROBE_EVERY_MS));
    const { outcome, ms, lagMs } = await probe(url);
    result.maxEventLoopLagMs = Math.max(result.maxEventLoopLagMs, lagMs ?? 0);
    result.sent++;
    result.outcomes[outcome] = (result.outcomes[outcome] ?? 0) + 1;
    // Kubelet counts a 200 that came after its timeout as a failure, as it does a probe cut at the timeout.
    if (outcome === '200' && ms <= PROBE_TIMEOUT_MS) {
      run = 0;
      result.slowestMs = Math.max(result.slowestMs, Math.round(ms));
    } else {
      result.failed++;
      result.longestFailureRun = Math.max(result.longestFailureRun, ++run);
    }
    await next;
  }
  return result;
}

/** Spawns the flooder and resolves once it is loaded; `go()` starts the flood, `result` is its figures. */
async function startFlooder(options: FloodOptions) {
  const child = spawn(process.execPath, [FLOOD_CLIENT, JSON.stringify(options)], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const lines = createInterface({ input: child.stdout });
  const iterator = lines[Symbol.asyncIterator]();
  const first = await iterator.next();
  if (first.value !== 'ready') throw new Error(`the flooder did not start: ${String(first.value)}`);
  return {
    go(): Promise<FloodFigures> {
      child.stdin.write('go\n');
      return iterator.next().then(({ value }) => {
        if (typeof value !== 'string') throw new Error('the flooder exited without its figures');
        return JSON.parse(value) as FloodFigures;
      });
    },
    kill: () => child.kill('SIGKILL'),
  };
}

function rateBetween(times: number[], fromMs: number, toMs: number): number {
  const inside = times.filter((at) => at > fromMs && at <= toMs).length;
  return toMs > fromMs ? (inside * 1_000) / (toMs - fromMs) : 0;
}

/**
 * 22 executions queued: with the task list, 22 polls, 22 reports and an empty poll they fit in one minute's
 * 50 requests, so both windows run at 5 requests a second and every claim is reported within the test.
 */
export function metricsFlood(options: MetricsFloodOptions): Promise<MetricsFloodResult> {
  return withRig({ limits: LIMITS }, async (rig) => {
    rig.enqueue(22);
    const daemon = rig.start({
      DF_BUDGET_PER_SECOND: String(LIMITS.perSecond),
      DF_BUDGET_PER_MINUTE: String(LIMITS.perMinute),
      // The default margin: the rig's 25 ms is for speed, and a flooded machine delays requests more.
      DF_BUDGET_SAFETY_MARGIN_MS: '200',
      // The kubelet's own port, as the chart sets it (9465 there).
      DF_HTTP_PROBE_PORT: '0',
      ...options.env,
    });
    await rig.waitFor(() => daemon.hasLog('serving /metrics, /healthz and /readyz'), 'the health server');
    const url = daemon.healthUrl();
    const probeUrl = daemon.probeUrl();
    const flooder = await startFlooder({
      url,
      clients: options.clients,
      durationMs: options.floodMs,
      ...(options.slowloris ? { slowloris: options.slowloris } : {}),
      ...(options.silent ? { silent: options.silent } : {}),
      ...(options.hugeHeaders ? { hugeHeaders: options.hugeHeaders } : {}),
    });
    try {
      await rig.waitFor(() => reportTimes(rig).length >= 10, 'ten reports before the flood');
      const before = reportTimes(rig);
      const unfloodedRate = rateBetween(before, before[1]!, before[9]!);
      // The emulator's clock is the system clock: its request times and Date.now() compare.
      const floodStartedAt = Date.now();
      const flooded = flooder.go();
      const probes = probeUntil(probeUrl, flooded);
      const floodedPortProbes = probeUntil(url, flooded);
      const flood = await flooded;
      const probeFigures = await probes;
      const floodedPortFigures = await floodedPortProbes;
      const floodEndedAt = Date.now();
      const during = reportTimes(rig);
      const windowEnd = Math.min(during[19] ?? floodEndedAt, floodEndedAt);
      const floodedRate = rateBetween(during, floodStartedAt, windowEnd);
      await rig.waitFor(
        () => rig.tally().claimed === rig.tally().reported,
        'every claimed execution reported',
        20_000,
      );
      const tally = rig.tally();
      return {
        figures: figuresOf(tally),
        tally,
        budget: budgetFigures(rig),
        unfloodedRate,
        floodedRate,
        probes: probeFigures,
        floodedPortProbes: floodedPortFigures,
        flood,
        daemonRunning: daemon.running,
      };
    } finally {
      flooder.kill();
    }
  });
}

/** One row of bench/faults-report.ts: the figures and a line on what the flood did. */
export interface MetricsFloodEntry {
  name: string;
  run: () => Promise<MetricsFloodResult & { detail: string }>;
}

/** One line of what the flood did and what the probes saw, for the bench's table and the suite's output. */
export function floodSummary(r: MetricsFloodResult): string {
  const answered = (path: string) =>
    Object.values(r.flood.paths[path]?.answers ?? {}).reduce((sum, n) => sum + n, 0);
  return (
    `reports ${r.unfloodedRate.toFixed(2)}/s before, ${r.floodedRate.toFixed(2)}/s under the flood ` +
    `(${answered('/metrics')} /metrics and ${answered('/healthz')} /healthz answered in ` +
    `${(r.flood.elapsedMs / 1000).toFixed(1)} s, ${r.flood.connections} connections; the flooder's /healthz ` +
    `p99 ${r.flood.paths['/healthz']?.p99Ms} ms, slowest ${r.flood.paths['/healthz']?.slowestMs} ms); ` +
    `kubelet-like /healthz probes: ${probeSummary(r.probes)} on the probe port, ` +
    `${probeSummary(r.floodedPortProbes)} on the flooded port`
  );
}

function probeSummary(p: ProbeFigures): string {
  return `${p.sent - p.failed}/${p.sent} ok (longest failure run ${p.longestFailureRun}), slowest ${p.slowestMs} ms`;
}

export const METRICS_FLOOD_SCENARIOS: MetricsFloodEntry[] = [
  {
    name: '26.6 500 clients on /metrics and /healthz',
    run: async () => {
      const r = await metricsFlood({ clients: 500, floodMs: 20_000 });
      return { ...r, detail: floodSummary(r) };
    },
  },
  {
    name: '26.6 slowloris, silent and oversized-header sockets besides',
    run: async () => {
      const r = await metricsFlood({
        clients: 200,
        floodMs: 8_000,
        slowloris: 50,
        silent: 50,
        hugeHeaders: 5,
      });
      return { ...r, detail: floodSummary(r) };
    },
  },
];
