// The monitoring as Prometheus itself sees it: `df-worker start` does real work against the emulator while a real
// Prometheus (Debian's package) scrapes it every second with the shipped alert rules loaded. Then promtool lints a
// live /metrics scrape, every query of every panel of the shipped Grafana dashboard is evaluated through
// Prometheus's HTTP API (each must parse and return data, or be listed below with the reason it is empty), and
// every rule must evaluate without error and none fire on this healthy worker. Last, a clustered replica (real
// Redis) under a backlog of slow handlers: the chart's autoscaling query, as helm renders it, reads its saturation.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { stringify as stringifyYaml } from 'yaml';
import { Emulator } from '../../src/emulator/index.ts';
import { runCli, REPO_ROOT, type CliProcess } from '../cli/process.ts';
import { waitFor } from '../daemon/harness.ts';
import { PLAIN_RULES_FILE, PLAIN_RULES_JOB } from './alert-rules.ts';
import {
  clusteredTestsRun,
  MISSING_REDIS_HINT,
  redisAvailable,
  RedisServer,
} from '../cluster/redis-server.ts';
import { renderManifests } from './helm-chart.ts';
import { findTool, MISSING_TOOL_HINT, runTool, runsHere } from './prometheus-tools.ts';

const DASHBOARD_FILE = path.join(REPO_ROOT, 'helm/df-worker/dashboards/df-worker.json');

/**
 * promtool's lint findings on the worker's /metrics that are kept on purpose, each with the reason. Anything else
 * promtool reports fails the test.
 */
const JUSTIFIED_LINT: Record<string, string> = {
  // prom-client's default Node.js metrics (collectDefaultMetrics) are gauges named *_total. The names are
  // prom-client's, shared by every Node.js service and the dashboards written for them; renaming them here alone
  // would break those dashboards for no gain.
  'dfworker_nodejs_active_handles_total non-counter metrics should not have "_total" suffix': 'prom-client',
  'dfworker_nodejs_active_requests_total non-counter metrics should not have "_total" suffix': 'prom-client',
  'dfworker_nodejs_active_resources_total non-counter metrics should not have "_total" suffix': 'prom-client',
};

/**
 * Dashboard queries expected to return nothing from a healthy worker doing ordinary work, by panel title and
 * legend, with the reason. Every other query must return data.
 */
const EXPECTED_EMPTY: Record<string, string> = {
  'Tasks served and handlers without a task / no task on the service: {{task}}':
    'every handler of a healthy worker has its task: the series exists only for a handler whose task is missing',
  // The cluster panels: a standalone worker (this one) exposes no dfworker_cluster_* series.
  'Replicas alive / __auto': 'clustered mode only',
  'Coordinators / __auto': 'clustered mode only',
  'Coordinator lease by replica / {{replica}}': 'clustered mode only',
  'Queue: jobs by state / {{state}}': 'clustered mode only',
  'Replicas: alive in Redis and scraped / alive (Redis)': 'clustered mode only',
  'Replicas: alive in Redis and scraped / scraped': 'clustered mode only',
  'Handler slots taken (the autoscaling signal) / slots taken': 'clustered mode only',
  'Handler slots taken (the autoscaling signal) / handler slots': 'clustered mode only',
};

/** Grafana's values of the dashboard's variables for this run: "All" of namespace and job, and the rate window. */
const SCRAPE_SECONDS = 1;
const GRAFANA_VARIABLES: Record<string, string> = {
  // Grafana's $__rate_interval: max(4 × scrape interval, step + scrape interval), with a 1 s step.
  __rate_interval: `${Math.max(4 * SCRAPE_SECONDS, 1 + SCRAPE_SECONDS)}s`,
  namespace: '.*',
  job: '.*',
};
const NAMESPACE = 'df-worker-test';

const KEY = 'live-prometheus-key';
const HANDLER = `import { defineTask } from 'df-worker';
export default defineTask({
  key: 'echo',
  inputKeys: ['n'],
  outputKeys: ['n'],
  handle: async (input: { n: number }) => {
    await new Promise((resolve) => setTimeout(resolve, 20 + (input.n % 5) * 40));
    if (input.n % 7 === 3) throw new Error('every seventh input fails');
    return { n: input.n };
  },
});
`;

interface Target {
  panel: string;
  legend: string;
  expr: string;
}

interface Dashboard {
  panels: { type: string; title: string; targets?: { expr: string; legendFormat?: string }[] }[];
  templating: { list: { name: string; type: string; query?: { query: string } }[] };
}

const dashboard = JSON.parse(await readFile(DASHBOARD_FILE, 'utf8')) as Dashboard;
const targets: Target[] = dashboard.panels.flatMap((panel) =>
  (panel.targets ?? []).map((target) => ({
    panel: panel.title,
    legend: target.legendFormat ?? '',
    expr: target.expr,
  })),
);

/** The expression as Grafana sends it: each `$name` and `${name}` replaced by the variable's value. */
function substituteVariables(expr: string): string {
  return expr.replace(/\$\{?(\w+)\}?/g, (whole, name: string) => {
    const value = GRAFANA_VARIABLES[name];
    if (value === undefined) throw new Error(`no value for the dashboard variable ${whole} in ${expr}`);
    return value;
  });
}

function reported(emulator: Emulator): number {
  return emulator.executions().filter((execution) => execution.reports.length > 0).length;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise((resolve) => server.close(resolve));
  if (typeof address !== 'object' || address === null) throw new Error('no port');
  return address.port;
}

interface PromAnswer<T> {
  status: 'success' | 'error';
  data: T;
  errorType?: string;
  error?: string;
}

type Matrix = {
  resultType: 'matrix';
  result: { metric: Record<string, string>; values: [number, string][] }[];
};

/** Starts Debian's prometheus on `port` with `config`, and waits until it is ready. */
async function startPrometheus(
  dir: string,
  port: number,
  config: Record<string, unknown>,
): Promise<{ child: ChildProcess; log: () => string }> {
  await writeFile(path.join(dir, 'prometheus.yml'), stringifyYaml(config));
  const child = spawn(
    findTool('prometheus')!,
    [
      `--config.file=${path.join(dir, 'prometheus.yml')}`,
      `--storage.tsdb.path=${path.join(dir, 'tsdb')}`,
      `--web.listen-address=127.0.0.1:${port}`,
      '--storage.tsdb.retention.time=1h',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let log = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (log += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (log += d));
  await vi.waitFor(
    async () => {
      expect(child.exitCode, log).toBeNull();
      expect((await fetch(`http://127.0.0.1:${port}/-/ready`)).status).toBe(200);
    },
    { timeout: 20_000, interval: 200 },
  );
  return { child, log: () => log };
}

async function stopProcess(child: ChildProcess | undefined): Promise<void> {
  if (!child || child.exitCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  await exited;
}

const missingTools = ['promtool', 'prometheus'].filter((tool) => findTool(tool) === undefined);

describe.skipIf(!runsHere('promtool', 'prometheus'))('a real Prometheus scraping a working daemon', () => {
  let emulator: Emulator;
  let dir: string;
  let daemon: CliProcess | undefined;
  let prometheus: ChildProcess | undefined;
  let promUrl = '';
  let metricsUrl = '';
  let startedAt = 0;
  let feeder: NodeJS.Timeout | undefined;

  async function api<T>(pathAndQuery: string): Promise<PromAnswer<T>> {
    const answer = await fetch(`${promUrl}${pathAndQuery}`);
    return (await answer.json()) as PromAnswer<T>;
  }

  async function instant(expr: string): Promise<number | undefined> {
    const answer = await api<{ result: { value: [number, string] }[] }>(
      `/api/v1/query?query=${encodeURIComponent(expr)}`,
    );
    const value = answer.data?.result?.[0]?.value[1];
    return value === undefined ? undefined : Number(value);
  }

  beforeAll(async () => {
    // Under CI without the tools, each test fails on its own (a failing hook would only mark them skipped).
    if (missingTools.length > 0) return;
    dir = await mkdtemp(path.join(os.tmpdir(), 'df-worker-live-prometheus-'));
    // Limits above the service's, so that a steady trickle of work never waits on the minute's budget.
    emulator = new Emulator({ apiKeys: [KEY], limits: { perSecond: 10, perMinute: 300, perMonth: 40_000 } });
    await emulator.listen();
    emulator.createTask({ key: 'echo', inputKeys: [{ key: 'n', description: '' }] });
    await mkdir(path.join(dir, 'handlers'));
    await writeFile(path.join(dir, 'handlers/echo.ts'), HANDLER);
    for (let n = 0; n < 4; n++) emulator.enqueueExecution('echo', { n });

    daemon = runCli(['start'], {
      DF_API_URL: emulator.url,
      DF_API_KEY: KEY,
      DF_HANDLERS_DIR: path.join(dir, 'handlers'),
      DF_STATE_DIR: path.join(dir, 'state'),
      DF_HTTP_PORT: '0',
      DF_HTTP_HOST: '127.0.0.1',
      DF_LOG_LEVEL: 'info',
      DF_BUDGET_PER_SECOND: '10',
      DF_BUDGET_PER_MINUTE: '300',
      // A job that queues work nudges the worker (POST /wake) rather than waiting for its idle poll.
      DF_HTTP_WAKE: 'open',
    });
    await waitFor(() => daemon!.logs().some((l) => l.msg === 'df-worker started'), 'the daemon', 20_000);
    metricsUrl = daemon.logs().find((l) => l.msg === 'serving /metrics, /healthz and /readyz')!.url as string;

    const port = await freePort();
    promUrl = `http://127.0.0.1:${port}`;
    const config = {
      global: { scrape_interval: `${SCRAPE_SECONDS}s`, evaluation_interval: `${SCRAPE_SECONDS}s` },
      rule_files: [PLAIN_RULES_FILE],
      scrape_configs: [
        {
          job_name: PLAIN_RULES_JOB,
          static_configs: [{ targets: [new URL(metricsUrl).host], labels: { namespace: NAMESPACE } }],
        },
      ],
    };
    startedAt = Date.now() / 1000;
    ({ child: prometheus } = await startPrometheus(dir, port, config));
    // Work arriving while Prometheus scrapes: an execution every 700 ms, each followed by a nudge.
    let n = 4;
    feeder = setInterval(() => {
      emulator.enqueueExecution('echo', { n: n++ });
      fetch(`${metricsUrl}/wake`, { method: 'POST' }).catch(() => undefined);
    }, 700);
    const reportedBefore = reported(emulator);
    // Enough for every panel: a dozen scrapes, with executions finished and reported between them.
    await waitFor(() => reported(emulator) >= reportedBefore + 10, 'ten executions reported', 40_000);
    await vi.waitFor(
      async () => {
        expect(
          await instant(`count_over_time(dfworker_ready{job="${PLAIN_RULES_JOB}"}[1m])`),
        ).toBeGreaterThanOrEqual(12);
        expect(await instant('sum(dfworker_reports_total{result="delivered"})')).toBeGreaterThanOrEqual(8);
      },
      { timeout: 40_000, interval: 500 },
    );
  }, 90_000);

  afterAll(async () => {
    clearInterval(feeder);
    await stopProcess(prometheus);
    if (daemon && daemon.child.exitCode === null) {
      daemon.child.kill('SIGTERM');
      await daemon.exited;
    }
    await emulator?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  }, 30_000);

  it('promtool check metrics: the live /metrics has no lint finding but the justified ones', async () => {
    expect(missingTools, MISSING_TOOL_HINT).toEqual([]);
    const scrape = await (await fetch(`${metricsUrl}/metrics`)).text();
    expect(scrape).toMatch(/^dfworker_executions_total\{task="echo",outcome="COMPLETED"\} \d+/m);
    const result = await runTool('promtool', ['check', 'metrics'], { input: scrape });
    const findings = (result.stdout + result.stderr).split('\n').filter((line) => line.trim() !== '');
    expect(findings.filter((line) => !(line in JUSTIFIED_LINT))).toEqual([]);
    // 0: no finding; 3: lint findings only (a text that does not parse exits 1).
    expect(result.code).toBe(findings.length === 0 ? 0 : 3);
  });

  it("the dashboard's variables find this worker's namespace and job", async () => {
    expect(missingTools, MISSING_TOOL_HINT).toEqual([]);
    const variables = dashboard.templating.list.filter((variable) => variable.type === 'query');
    expect(variables.map((variable) => variable.query?.query)).toEqual([
      'label_values(dfworker_ready, namespace)',
      'label_values(dfworker_ready{namespace=~"$namespace"}, job)',
    ]);
    for (const [label, match, want] of [
      ['namespace', 'dfworker_ready', NAMESPACE],
      ['job', substituteVariables('dfworker_ready{namespace=~"$namespace"}'), PLAIN_RULES_JOB],
    ] as const) {
      const answer = await api<string[]>(
        `/api/v1/label/${label}/values?match[]=${encodeURIComponent(match)}`,
      );
      expect(answer.data).toEqual([want]);
    }
  });

  it('every query of every panel parses and returns data, or is listed as expected to be empty', async () => {
    expect(missingTools, MISSING_TOOL_HINT).toEqual([]);
    const end = Date.now() / 1000;
    const results = await Promise.all(
      targets.map(async (target) => {
        const query = new URLSearchParams({
          query: substituteVariables(target.expr),
          start: String(startedAt),
          end: String(end),
          step: '1',
        });
        const answer = await api<Matrix>(`/api/v1/query_range?${query.toString()}`);
        const points = (answer.data?.result ?? []).flatMap((series) =>
          series.values.filter(([, value]) => Number.isFinite(Number(value))),
        );
        return { ...target, name: `${target.panel} / ${target.legend}`, answer, points: points.length };
      }),
    );
    const errors = results.filter((r) => r.answer.status !== 'success');
    expect(errors.map((r) => `${r.name}: ${r.answer.error ?? ''}`)).toEqual([]);
    const empty = results.filter((r) => r.points === 0).map((r) => r.name);
    expect(empty.sort()).toEqual(Object.keys(EXPECTED_EMPTY).sort());
    console.log(
      `dashboard: ${results.length} queries in ${dashboard.panels.filter((p) => p.targets).length} panels, ` +
        `${results.length - empty.length} returned data, ${empty.length} empty as expected`,
    );
  });

  it('the alert rules evaluate without error against the live series and none fires for this healthy worker', async () => {
    expect(missingTools, MISSING_TOOL_HINT).toEqual([]);
    const rules = await api<{ groups: { rules: { name: string; health: string; lastError?: string }[] }[] }>(
      '/api/v1/rules',
    );
    const loaded = rules.data.groups.flatMap((group) => group.rules);
    expect(loaded.length).toBeGreaterThanOrEqual(12);
    expect(
      loaded.filter((rule) => rule.health !== 'ok').map((r) => `${r.name}: ${r.lastError ?? r.health}`),
    ).toEqual([]);
    const alerts = await api<{ alerts: { labels: { alertname: string }; state: string }[] }>(
      '/api/v1/alerts',
    );
    // This run spends requests at a few a second, far above what the month's 40,000 allow over the days left:
    // the projection alert is rightly pending (it fires only after an hour of it). Nothing else is even pending.
    expect(alerts.data.alerts.map((alert) => `${alert.labels.alertname} ${alert.state}`)).toEqual([
      'DfWorkerBudgetProjectedToRunOut pending',
    ]);
  });
});

const SLOW_HANDLER = `import { defineTask } from 'df-worker';
export default defineTask({
  key: 'slow',
  inputKeys: ['n'],
  outputKeys: ['n'],
  handle: async (input: { n: number }) => {
    await new Promise((resolve) => setTimeout(resolve, 1500));
    return { n: input.n };
  },
});
`;

describe.skipIf(!runsHere('promtool', 'prometheus') || !clusteredTestsRun)(
  "a real Prometheus scraping a clustered replica: the chart's autoscaling signal",
  () => {
    let emulator: Emulator | undefined;
    let redis: RedisServer | undefined;
    let dir = '';
    let replica: CliProcess | undefined;
    let prometheus: ChildProcess | undefined;

    afterAll(async () => {
      await stopProcess(prometheus);
      if (replica && replica.child.exitCode === null) {
        replica.child.kill('SIGTERM');
        await replica.exited;
      }
      await emulator?.close();
      await redis?.stop();
      if (dir) await rm(dir, { recursive: true, force: true });
    }, 30_000);

    it('the ScaledObject query, rendered by helm, reads every slot taken under a backlog of slow handlers, so 2 replicas wanted', async () => {
      expect(missingTools, MISSING_TOOL_HINT).toEqual([]);
      expect(redisAvailable, MISSING_REDIS_HINT).toBe(true);
      // The query as the chart renders it for this namespace, and the labels a ServiceMonitor gives the series.
      const scaled = renderManifests(
        {
          config: { api: { url: 'https://api.example.com' } },
          apiKey: { existingSecret: 'key' },
          redis: { existingSecret: 'redis' },
          autoscaling: { keda: { enabled: true } },
        },
        { namespace: NAMESPACE },
      ).find((manifest) => manifest.kind === 'ScaledObject') as unknown as {
        spec: { triggers: { metadata: { query: string; threshold: string } }[] };
      };
      const { query, threshold } = scaled.spec.triggers[0]!.metadata;
      expect(query).toBe(`max(dfworker_cluster_saturation{namespace="${NAMESPACE}", service="df-worker"})`);

      dir = await mkdtemp(path.join(os.tmpdir(), 'df-worker-live-prometheus-cluster-'));
      redis = await RedisServer.start();
      emulator = new Emulator({
        apiKeys: [KEY],
        limits: { perSecond: 10, perMinute: 300, perMonth: 40_000 },
      });
      await emulator.listen();
      emulator.createTask({ key: 'slow', inputKeys: [{ key: 'n', description: '' }] });
      await mkdir(path.join(dir, 'handlers'));
      await writeFile(path.join(dir, 'handlers/slow.ts'), SLOW_HANDLER);
      for (let n = 0; n < 4; n++) emulator.enqueueExecution('slow', { n });
      replica = runCli(['start'], {
        DF_API_URL: emulator.url,
        DF_API_KEY: KEY,
        DF_REDIS_URL: redis.url,
        DF_REPLICA_ID: 'replica-0',
        DF_CONCURRENCY: '1',
        DF_HANDLERS_DIR: path.join(dir, 'handlers'),
        DF_STATE_DIR: path.join(dir, 'state'),
        DF_HTTP_PORT: '0',
        DF_HTTP_HOST: '127.0.0.1',
        DF_LOG_LEVEL: 'info',
        DF_BUDGET_PER_SECOND: '10',
        DF_BUDGET_PER_MINUTE: '300',
        DF_MIN_POLL_INTERVAL_MS: '0',
        DF_MAX_POLL_INTERVAL_MS: '1000',
      });
      await waitFor(
        () => replica!.logs().some((l) => l.msg === 'df-worker started (clustered)'),
        'the clustered replica',
        30_000,
      );
      const metricsUrl = replica.logs().find((l) => l.msg === 'serving /metrics, /healthz and /readyz')!
        .url as string;
      const port = await freePort();
      ({ child: prometheus } = await startPrometheus(dir, port, {
        global: { scrape_interval: `${SCRAPE_SECONDS}s` },
        scrape_configs: [
          {
            job_name: 'df-worker',
            static_configs: [
              { targets: [new URL(metricsUrl).host], labels: { namespace: NAMESPACE, service: 'df-worker' } },
            ],
          },
        ],
      }));
      const instant = async (expr: string): Promise<number | undefined> => {
        const answer = (await (
          await fetch(`http://127.0.0.1:${port}/api/v1/query?query=${encodeURIComponent(expr)}`)
        ).json()) as PromAnswer<{ result: { value: [number, string] }[] }>;
        const value = answer.data?.result?.[0]?.value[1];
        return value === undefined ? undefined : Number(value);
      };
      // One slot, four slow executions at the service: one runs, the coordinator claims the next once the slot frees.
      await vi.waitFor(async () => expect(await instant(query)).toBe(1), { timeout: 40_000, interval: 500 });
      expect(await instant('max(dfworker_cluster_handler_slots)')).toBe(1);
      // KEDA's Value target: ceil(1 replica x saturation / threshold) replicas wanted.
      expect(Math.ceil(1 / Number(threshold))).toBe(2);
      // Once the backlog is done the slot is free again: the signal falls to 0 (and the autoscaler scales down).
      await vi.waitFor(async () => expect(await instant(query)).toBe(0), { timeout: 40_000, interval: 500 });
      expect(emulator.executions().filter((execution) => execution.reports.length > 0)).toHaveLength(4);
    }, 90_000);
  },
);
