// The month replay: df-worker's own scheduling code (budget, planner, scheduler, reporter and service client,
// wired from the configuration as the daemon wires them) polls the project's emulator for a month of given
// arrivals, in virtual time. Requests go in process (no socket) but through the emulator's whole request path:
// key, 5/s, 50/min and month limits, the request log. A month of 20,000 executions replays in seconds.
import { setImmediate as turn } from 'node:timers/promises';
import { pino } from 'pino';
import type { ServiceTransport } from '../api/client.ts';
import { ServiceClient } from '../api/client.ts';
import type { Answer } from '../api/response.ts';
import { calendarMonthWindow, parseMonthKey } from '../budget/month.ts';
import { memoryBudgetStore } from '../budget/store.ts';
import { ManualClock } from '../clock/manual-clock.ts';
import { loadConfig } from '../config/index.ts';
import {
  backoffFromConfig,
  budgetFromConfig,
  reportReserveFor,
  plannerFromConfig,
  taskRefreshIntervalMs,
} from '../daemon/service-wiring.ts';
import { Emulator } from '../emulator/index.ts';
import { Reporter } from '../scheduler/reporter.ts';
import { Scheduler } from '../scheduler/scheduler.ts';
import type { Arrival, ClaimRecord, ReplayResult, RequestKind, RequestRecord } from './types.ts';

export interface ReplayOptions {
  arrivals: readonly Arrival[];
  /** `YYYY-MM`, in `timeZone`. Default `2026-11`. */
  month?: string;
  /** The budget's time zone (DF_BUDGET_TIME_ZONE); default the configuration's (UTC). */
  timeZone?: string;
  /** How long each execution's (trivial) handler takes, in ms. Default 0. */
  handlerMs?: number;
  /** DF_CONCURRENCY; default the configuration's. */
  concurrency?: number;
  /** `DF_*` settings, read as the daemon reads its environment. */
  env?: Record<string, string | undefined>;
  /** The state folder (the learned arrival profile is kept there); default: kept in memory only. */
  stateDir?: string;
}

const API_KEY = 'replay-key';
/** Limits of the service itself (API part 8), whatever the daemon's configured budget says. */
const SERVICE_LIMITS = { perSecond: 5, perMinute: 50, perMonth: 40_000 };

export async function replayMonth(options: ReplayOptions): Promise<ReplayResult> {
  const env: Record<string, string | undefined> = {
    ...options.env,
    DF_API_URL: 'http://replay.invalid',
    DF_API_KEY: API_KEY,
    DF_API_KEY_FILE: undefined,
  };
  if (options.timeZone !== undefined) env.DF_BUDGET_TIME_ZONE = options.timeZone;
  if (options.concurrency !== undefined) env.DF_CONCURRENCY = String(options.concurrency);
  if (options.stateDir !== undefined) env.DF_STATE_DIR = options.stateDir;
  const config = loadConfig({ env, require: 'service' });
  const monthKey = options.month ?? '2026-11';
  const parsed = parseMonthKey(monthKey);
  if (!parsed) throw new Error(`month must be YYYY-MM, not '${monthKey}'`);
  const { startMs: startsAt, endMs: endsAt } = calendarMonthWindow(
    parsed.year,
    parsed.month,
    config.budget.timeZone,
  );
  const handlerMs = options.handlerMs ?? 0;

  const clock = new ManualClock(startsAt);
  const logger = pino({ level: 'silent' });
  const emulator = new Emulator({ clock, apiKeys: [API_KEY], limits: SERVICE_LIMITS });
  const keys = [...new Set(options.arrivals.map((a) => a.task))].sort();
  const taskIdByKey = new Map(keys.map((key) => [key, emulator.createTask({ key }).id]));
  const keyByTaskId = new Map([...taskIdByKey].map(([key, id]) => [id, key]));

  const budget = budgetFromConfig(config, clock, reportReserveFor(0), memoryBudgetStore());
  await budget.load();
  const client = new ServiceClient({
    baseUrl: config.api.url,
    apiKey: API_KEY,
    gate: budget,
    transport: inProcessTransport(emulator),
  });
  const planner = await plannerFromConfig(config, budget, { inMemory: options.stateDir === undefined });
  const reporter = new Reporter({ client, clock, logger, backoff: backoffFromConfig(config) });
  const stop = new AbortController();
  const scheduler = new Scheduler({
    client,
    planner,
    clock,
    logger,
    concurrency: config.concurrency,
    unauthorizedRetryMs: config.scheduler.errorBackoffMaxMs,
    onReportsOwed: (owed) => {
      budget.reportReserve = reportReserveFor(owed);
    },
    dispatch: async (_task, execution) => {
      if (handlerMs > 0) await clock.sleep(handlerMs);
      await reporter.report(execution.id, { status: 'COMPLETED', output: {} });
    },
  });

  const listTasks = async () => {
    const tasks = await client.listTasks({ signal: stop.signal });
    planner.setTasks(
      tasks.map((t) => ({ id: t.id, key: t.key })),
      clock.now(),
    );
  };
  const loops: Promise<unknown>[] = [];
  // The daemon lists the tasks at start, then every DF_TASK_REFRESH_MS.
  loops.push(
    (async () => {
      await listTasks();
      loops.push(scheduler.run(stop.signal));
      while (!stop.signal.aborted) {
        // Every task has its (trivial) handler: the list is refreshed at the slower, all-matched pace.
        await clock.sleep(taskRefreshIntervalMs(config, true, planner.overloaded(clock.now())), stop.signal);
        await listTasks();
      }
    })().catch(() => undefined),
  );
  const arrivals = [...options.arrivals]
    .filter((a) => a.at >= startsAt && a.at < endsAt)
    .sort((a, b) => a.at - b.at);
  loops.push(
    (async () => {
      for (const arrival of arrivals) {
        if (arrival.at > clock.now()) await clock.sleep(arrival.at - clock.now(), stop.signal);
        emulator.enqueueExecution(taskIdByKey.get(arrival.task)!);
      }
    })().catch(() => undefined),
  );

  await runUntil(clock, endsAt);
  stop.abort(new Error('the month is over'));
  await turn();
  await Promise.allSettled(loops);
  await planner.save();

  return {
    name: 'df-worker',
    startsAt,
    endsAt,
    claims: emulator.executions().map((e): ClaimRecord => ({
      task: e.taskKey,
      arrivedAt: Date.parse(e.createdAt),
      claimedAt: e.claimedAt === undefined ? null : Date.parse(e.claimedAt),
      reportedAt: e.reports[0] === undefined ? null : Date.parse(e.reports[0].at),
    })),
    requests: requestRecords(emulator, keyByTaskId),
  };
}

/** Moves virtual time from sleeper to sleeper until `endMs`, letting every continuation run in between. */
async function runUntil(clock: ManualClock, endMs: number): Promise<void> {
  for (;;) {
    // Two turns: a continuation may schedule more work at the same instant (a report after a claim).
    await turn();
    await turn();
    const next = clock.nextWakeAt;
    if (next === undefined || next >= endMs) break;
    clock.wakeNext();
  }
  clock.set(Math.max(clock.now(), endMs));
}

function inProcessTransport(emulator: Emulator): ServiceTransport {
  return {
    async send(_operation, request): Promise<Answer> {
      if (typeof request.body !== 'string' && request.body !== undefined) {
        throw new Error('the replay carries JSON bodies only (no file uploads)');
      }
      const answer = await emulator.answer({
        method: request.method,
        path: request.path,
        headers: request.headers,
        ...(request.body === undefined ? {} : { body: request.body }),
      });
      if (!answer) throw new Error('the emulator dropped the connection');
      return { status: answer.status, headers: answer.headers, text: answer.body ?? '' };
    },
    close: () => Promise.resolve(),
  };
}

const KINDS: Record<string, RequestKind> = {
  'tasks.poll': 'poll',
  'executions.report': 'report',
  'tasks.list': 'list',
};

function requestRecords(emulator: Emulator, keyByTaskId: Map<string, string>): RequestRecord[] {
  const keyByExecution = new Map(emulator.executions().map((e) => [e.id, e.taskKey]));
  return emulator.requests().map((r) => {
    const kind = KINDS[r.operation] ?? 'other';
    const id = /\/([^/]+)(?:\/poll)?$/.exec(r.path)?.[1];
    const task =
      kind === 'poll'
        ? keyByTaskId.get(id ?? '')
        : kind === 'report'
          ? keyByExecution.get(id ?? '')
          : undefined;
    return { at: r.at, kind, ...(task === undefined ? {} : { task }), status: r.status };
  });
}
