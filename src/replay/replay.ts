// The month replay: the daemon itself (the same core as `df-worker start`: task list, planner, scheduler,
// execution pipeline, reporter and service client, wired from the configuration) polls the project's emulator
// for a month of given arrivals, in virtual time. Its state is kept in memory, its handlers run in process on
// the virtual clock, and requests go in process (no socket) but through the emulator's whole request path:
// key, 5/s, 50/min and month limits, the request log. A month of 20,000 executions replays in seconds.
import { SERVICE_REQUEST_LIMITS } from '../api/service-limits.ts';
import { setImmediate as turn } from 'node:timers/promises';
import { pino } from 'pino';
import { calendarMonthWindow, parseMonthKey } from '../budget/month.ts';
import type { JsonObject } from '../api/types.ts';
import { ManualClock } from '../clock/manual-clock.ts';
import { loadConfig } from '../config/index.ts';
import { standaloneDaemon } from '../standalone/standalone-mode.ts';
import { WorkerEvents } from '../events/worker-events.ts';
import { Emulator, inProcessTransport } from '../emulator/index.ts';
import { defineTask, type TaskModule } from '../handlers/define-task.ts';
import { WorkerMetrics } from '../telemetry/metrics.ts';
import { PipelineRuns, type ChainedArrival, type JobsFile } from './jobs.ts';
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
  /**
   * A chained month: the emulator runs these jobs (a custom step's execution is created when the step before
   * it was reported), besides `arrivals`. Claims then carry `step`.
   */
  jobs?: JobsFile;
}

const API_KEY = 'replay-key';

export async function replayMonth(options: ReplayOptions): Promise<ReplayResult> {
  const env: Record<string, string | undefined> = {
    ...options.env,
    DF_API_URL: 'http://replay.invalid',
    DF_API_KEY: API_KEY,
    DF_API_KEY_FILE: undefined,
    // Handlers run in process, on the virtual clock.
    DF_HANDLER_ISOLATION: 'none',
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
  // The service's own limits, whatever the daemon's configured budget says.
  const emulator = new Emulator({ clock, apiKeys: [API_KEY], limits: { ...SERVICE_REQUEST_LIMITS } });
  const runs = options.jobs ? new PipelineRuns(options.jobs) : undefined;
  const keys = [
    ...new Set([
      ...options.arrivals.map((a) => a.task),
      ...(runs?.tasks() ?? []),
      ...(options.jobs?.extraTasks ?? []),
    ]),
  ].sort();
  const taskIdByKey = new Map(keys.map((key) => [key, emulator.createTask({ key }).id]));
  // The service lists the jobs (for DF_PIPELINE_PACING); an execution's context names its job by id.
  const jobIdByKey = new Map(
    (options.jobs?.jobs ?? []).map((job) => [
      job.key,
      String(emulator.createJob(structuredClone(job) as unknown as JsonObject).id),
    ]),
  );
  const keyByTaskId = new Map([...taskIdByKey].map(([key, id]) => [id, key]));
  // Every task has its (trivial) handler: the task list is refreshed at the slower, all-matched pace.
  const handlers = new Map<string, TaskModule>(
    keys.map((key) => [
      key,
      defineTask({
        key,
        description: 'replayed execution',
        handle: async () => {
          if (handlerMs > 0) await clock.sleep(handlerMs);
          return {};
        },
      }),
    ]),
  );
  const stop = new AbortController();
  /** The chained arrival behind each execution the emulator created for a job run. */
  const chained = new Map<string, ChainedArrival>();
  // Each run shows in the job-executions list from its start (what DF_PIPELINE_PACING reads), in progress
  // until the next run of its pipeline starts (a run ends before that; nothing reads the end itself).
  const pipelineOf = new Map((options.jobs?.jobs ?? []).map((job) => [job.key, job.pipeline ?? job.key]));
  const inProgress = new Map<string, string>();
  const showStarts = () => {
    for (const start of runs?.startedUntil(Infinity) ?? []) {
      if (start.at >= endsAt) continue;
      void clock
        .sleep(Math.max(0, start.at - clock.now()), stop.signal)
        .then(() => {
          const pipeline = pipelineOf.get(start.job) ?? start.job;
          const before = inProgress.get(pipeline);
          if (before !== undefined) emulator.endJobRun(before);
          const run = emulator.startJobRun(jobIdByKey.get(start.job) ?? start.job, { pipelineId: pipeline });
          inProgress.set(pipeline, run.id);
        })
        .catch(() => undefined);
    }
  };
  const feed = (list: readonly ChainedArrival[]) => {
    showStarts();
    for (const a of list) {
      if (a.at >= endsAt) continue;
      void clock
        .sleep(Math.max(0, a.at - clock.now()), stop.signal)
        .then(() => {
          const context = { jobId: jobIdByKey.get(a.job) ?? a.job, jobAccountId: 'replay' };
          chained.set(emulator.enqueueExecution(taskIdByKey.get(a.task)!, {}, context).id, a);
        })
        .catch(() => undefined);
    }
  };
  const chainedTransport = (emu: Emulator, reported: (id: number) => void) => {
    const inner = inProcessTransport(emu);
    // A report sent again (after a lost answer) does not run the job's next step twice.
    const done = new Set<number>();
    return {
      ...inner,
      async send(...args: Parameters<typeof inner.send>) {
        const answer = await inner.send(...args);
        const id = /\/([^/]+)$/.exec(args[1].path)?.[1];
        const arrival = id === undefined ? undefined : chained.get(id);
        if (args[0] === 'executions.report' && answer.status < 300 && arrival && !done.has(arrival.id)) {
          done.add(arrival.id);
          reported(arrival.id);
        }
        return answer;
      },
    };
  };
  const worker = standaloneDaemon(
    {
      config,
      logger: pino({ level: 'silent' }),
      clock,
      handlers,
      transport: runs
        ? chainedTransport(emulator, (id) => feed(runs.reported(id, clock.now())))
        : inProcessTransport(emulator),
      metrics: new WorkerMetrics({ defaultMetrics: false }),
      // A month emits millions of events in seconds: the development freeze of each payload (a quarter of a
      // replay's time) proves nothing here that the daemon's own tests do not.
      events: new WorkerEvents({ freezePayloads: false }),
    },
    { memory: { keepProfile: options.stateDir !== undefined } },
  );
  await worker.start();
  if (runs) feed(runs.start());
  const arrivals = [...options.arrivals]
    .filter((a) => a.at >= startsAt && a.at < endsAt)
    .sort((a, b) => a.at - b.at);
  const feeding = (async () => {
    for (const arrival of arrivals) {
      if (arrival.at > clock.now()) await clock.sleep(arrival.at - clock.now(), stop.signal);
      emulator.enqueueExecution(taskIdByKey.get(arrival.task)!);
    }
  })().catch(() => undefined);

  await runUntil(clock, endsAt);
  stop.abort(new Error('the month is over'));
  const result: ReplayResult = {
    name: 'df-worker',
    startsAt,
    endsAt,
    claims: emulator.executions().map((e): ClaimRecord => {
      const step = chained.get(e.id)?.order;
      return {
        task: e.taskKey,
        arrivedAt: Date.parse(e.createdAt),
        claimedAt: e.claimedAt === undefined ? null : Date.parse(e.claimedAt),
        reportedAt: e.reports[0] === undefined ? null : Date.parse(e.reports[0].at),
        ...(step === undefined ? {} : { step }),
      };
    }),
    requests: requestRecords(emulator, keyByTaskId),
  };
  // The daemon drains as at SIGTERM (what it learnt of arrivals is saved), on virtual time; the month's
  // figures were taken above.
  const stopped = worker.stop();
  let done = false;
  void stopped.finally(() => (done = true));
  while (!done) {
    await turn();
    await turn();
    if (!done && clock.nextWakeAt !== undefined) clock.wakeNext();
  }
  await stopped;
  await feeding;
  return result;
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

const KINDS: Record<string, RequestKind> = {
  'tasks.poll': 'poll',
  'executions.report': 'report',
  'tasks.list': 'list',
  'jobExecutions.list': 'job-list',
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
