// One claimed execution from claim to report, on the manual clock: the emulator answers in process, the
// journal is the real one in a temporary state folder. Handler attempts, their time limits and back-offs, and
// report retries all run in virtual time.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { JsonObject, TaskExecution } from '../../src/api/types.ts';
import type { BackoffOptions } from '../../src/clock/backoff.ts';
import { ManualClock } from '../../src/clock/manual-clock.ts';
import type { ExecutionJournal } from '../../src/daemon/execution-journal.ts';
import { ExecutionPipeline } from '../../src/daemon/execution-pipeline.ts';
import { Emulator } from '../../src/emulator/index.ts';
import { defineTask, NonRetryableError, type TaskSpec } from '../../src/handlers/define-task.ts';
import { Journal } from '../../src/journal/journal.ts';
import { SHUTDOWN_MESSAGE, type ExecutionOutcome } from '../../src/runner/run-execution.ts';
import { Reporter } from '../../src/reports/reporter.ts';
import { driveClockUntil, inProcessTransport, serviceOnClock, runOnClock } from '../clock/virtual-time.ts';
import { WorkerEvents } from '../../src/events/worker-events.ts';

const KEY = 'pipeline-test-key';
const START = Date.UTC(2026, 10, 27, 12);
const logger = pino({ level: 'silent' });

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

interface RigOptions {
  /** The service's task: retryCount, inputKeys and outputKeys win over the handler's. */
  task?: { retryCount?: number; inputKeys?: string[]; outputKeys?: string[] };
  handle: TaskSpec['handle'];
  timeoutMs?: number;
  /** Makes these journal operations fail (the state folder going read-only, say). */
  failing?: (keyof ExecutionJournal)[];
  /** Awaited before each journal write (a slow disk): the test decides when it goes on. */
  beforeWrite?: (name: keyof ExecutionJournal) => Promise<void>;
}

async function rig(options: RigOptions) {
  const clock = new ManualClock(START);
  const emulator = new Emulator({
    clock,
    apiKeys: [KEY],
    limits: { perSecond: 0, perMinute: 0, perMonth: 0 },
  });
  const stateDir = await mkdtemp(join(tmpdir(), 'df-worker-pipeline-'));
  cleanups.push(() => rm(stateDir, { recursive: true, force: true }));
  const journal = await Journal.open(stateDir, { logger, clock });
  /** What happened, in order: journal writes, and each report as it reaches the service with the journal then. */
  const events: string[] = [];
  const transport = inProcessTransport(emulator, async (operation) => {
    if (operation !== 'executions.report') return;
    const [entry] = await journal.pending();
    events.push(`report sent (journal: ${entry ? `${entry.phase} ${entry.outcome?.status}` : 'empty'})`);
  });
  const { client } = serviceOnClock(emulator, clock, {
    apiKey: KEY,
    limits: { perSecond: 50, perMinute: 3_000, perMonth: 100_000 },
    transport,
  });
  const keys = (list: string[] = []) => list.map((key) => ({ key, description: '' }));
  const task = emulator.createTask({
    key: 'resize',
    retryCount: options.task?.retryCount ?? 0,
    inputKeys: keys(options.task?.inputKeys),
    outputKeys: keys(options.task?.outputKeys),
  });
  const calls: number[] = [];
  const handler = defineTask({
    key: 'resize',
    ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }),
    handle: (input, ctx) => {
      calls.push(clock.now() - START);
      return options.handle(input, ctx);
    },
  });
  const recording: ExecutionJournal = {
    recordClaim: (claim, outcome) =>
      step('recordClaim', `claim${outcome ? ' with outcome' : ''}`, () =>
        journal.recordClaim(claim, outcome),
      ),
    recordStart: (id) => step('recordStart', 'start', () => journal.recordStart(id)),
    recordOutcome: (id, outcome) =>
      step('recordOutcome', `outcome ${outcome.status}`, () => journal.recordOutcome(id, outcome)),
    recordReportAttempt: (id) =>
      step('recordReportAttempt', 'report attempt', () => journal.recordReportAttempt(id)),
    complete: (id) => step('complete', 'complete', () => journal.complete(id)),
    deadLetter: (id, answer) =>
      step('deadLetter', `dead letter ${answer.status}`, () => journal.deadLetter(id, answer)),
    owes: (id) => journal.owes(id),
  };
  async function step(
    name: keyof ExecutionJournal,
    event: string,
    write: () => Promise<void>,
  ): Promise<void> {
    if (options.failing?.includes(name)) {
      events.push(`${event} failed`);
      throw new Error(`${name}: EROFS: read-only file system`);
    }
    await options.beforeWrite?.(name);
    await write();
    events.push(event);
  }
  // Handed to runExecution as it is: a fixed `random` makes the full jitter half of each ceiling.
  const attemptBackoff: BackoffOptions = { baseMs: 1_000, maxMs: 8_000, random: () => 0.5 };
  const outcomes: ExecutionOutcome[] = [];
  const reported: string[] = [];
  const redelivered: string[] = [];
  const stopHandlers = new AbortController();
  const stopReports = new AbortController();
  const pipelineEvents = new WorkerEvents();
  const pipeline = new ExecutionPipeline({
    journal: recording,
    reporter: new Reporter({
      client,
      clock,
      logger,
      backoff: { baseMs: 100, maxMs: 1_000, random: () => 0.5 },
    }),
    clock,
    logger,
    defaultTimeoutMs: 10_000,
    backoff: attemptBackoff,
    lookup: (taskId) => (taskId === task.id ? { task, handler } : undefined),
    handlerSignal: stopHandlers.signal,
    reportSignal: stopReports.signal,
    events: pipelineEvents,
  });
  pipelineEvents.on('outcome', ({ outcome }) => outcomes.push(outcome));
  pipelineEvents.on('report', ({ result, attempts }) => reported.push(`${result} after ${attempts}`));
  pipelineEvents.on('redelivered', ({ executionId }) => redelivered.push(executionId));

  /** Claims an execution through a real poll, as the scheduler would. */
  async function claim(input: JsonObject = {}): Promise<TaskExecution> {
    emulator.enqueueExecution(task.id, input);
    const execution = await client.pollTask(task.id);
    if (!execution) throw new Error('nothing to claim');
    events.length = 0;
    return execution;
  }

  /** Claims an execution and runs it through the pipeline to its end. */
  async function claimAndRun(input: JsonObject = {}): Promise<TaskExecution> {
    const execution = await claim(input);
    await runOnClock(clock, pipeline.process({ taskId: task.id, key: task.key }, execution));
    return execution;
  }

  return {
    clock,
    emulator,
    client,
    journal,
    task,
    events,
    calls,
    outcomes,
    reported,
    redelivered,
    stopHandlers,
    stopReports,
    claim,
    claimAndRun,
    pipeline,
  };
}

describe('ExecutionPipeline', () => {
  it('journals the claim and the outcome before it reports COMPLETED, then removes the record', async () => {
    const r = await rig({ task: { inputKeys: ['url'], outputKeys: ['size'] }, handle: () => ({ size: 42 }) });
    const execution = await r.claimAndRun({ url: 'https://example.test/a.png' });
    expect(r.events).toEqual([
      'claim',
      'outcome COMPLETED',
      'report sent (journal: finished COMPLETED)',
      'complete',
    ]);
    expect(r.emulator.execution(execution.id)).toMatchObject({
      status: 'COMPLETED',
      reports: [{ status: 'COMPLETED', output: { size: 42 } }],
    });
    expect(r.reported).toEqual(['delivered after 1']);
    expect(await r.journal.pending()).toEqual([]);
  });

  it('does not call the handler when a declared input key is missing, and reports FAILED naming it', async () => {
    const r = await rig({ task: { inputKeys: ['url', 'width'] }, handle: () => ({}) });
    const execution = await r.claimAndRun({ url: 'https://example.test/a.png' });
    expect(r.calls).toEqual([]);
    expect(r.outcomes[0]).toMatchObject({ status: 'FAILED', attempts: 0, failure: { kind: 'input' } });
    expect(r.emulator.execution(execution.id)?.reports).toMatchObject([
      { status: 'FAILED', output: { missingInputKeys: ['width'] } },
    ]);
  });

  it('reports FAILED after retryCount + 1 attempts, each after the back-off, on the clock', async () => {
    const r = await rig({
      task: { retryCount: 2 },
      handle: () => {
        throw new Error('upstream refused');
      },
    });
    const execution = await r.claimAndRun();
    // Full jitter at 0.5 of the ceiling: 500 ms after the first failure, 1000 ms after the second.
    expect(r.calls).toEqual([0, 500, 1_500]);
    expect(r.outcomes[0]).toMatchObject({ status: 'FAILED', attempts: 3, durationMs: 1_500 });
    const [report] = r.emulator.execution(execution.id)!.reports;
    expect(report).toMatchObject({ status: 'FAILED', output: { error: 'upstream refused', attempts: 3 } });
    expect(Date.parse(report!.at)).toBe(START + 1_500);
  });

  it('completes on a retry when a later attempt succeeds', async () => {
    let failures = 1;
    const r = await rig({
      task: { retryCount: 3 },
      handle: () => {
        if (failures-- > 0) throw new Error('flaky');
        return { ok: true };
      },
    });
    const execution = await r.claimAndRun();
    expect(r.calls).toEqual([0, 500]);
    expect(r.emulator.execution(execution.id)?.reports).toEqual([
      expect.objectContaining({ status: 'COMPLETED', output: { ok: true } }),
    ]);
  });

  it('does not retry a NonRetryableError', async () => {
    const r = await rig({
      task: { retryCount: 5 },
      handle: () => {
        throw new NonRetryableError('no such image');
      },
    });
    const execution = await r.claimAndRun();
    expect(r.calls).toEqual([0]);
    expect(r.emulator.execution(execution.id)?.reports[0]).toMatchObject({
      status: 'FAILED',
      output: { error: 'no such image', attempts: 1 },
    });
  });

  it('times an attempt out at timeoutMs of clock time and retries it', async () => {
    const r = await rig({
      task: { retryCount: 1 },
      timeoutMs: 2_000,
      handle: () => new Promise<never>(() => {}),
    });
    const execution = await r.claimAndRun();
    // 2 s limit, 500 ms back-off, 2 s limit again.
    expect(r.calls).toEqual([0, 2_500]);
    expect(r.outcomes[0]).toMatchObject({
      status: 'FAILED',
      attempts: 2,
      durationMs: 4_500,
      failure: { kind: 'timeout' },
    });
    expect(Date.parse(r.emulator.execution(execution.id)!.reports[0]!.at)).toBe(START + 4_500);
  });

  it('reports FAILED a handler still running when the shutdown grace period ends', async () => {
    const r = await rig({
      task: { retryCount: 3 },
      timeoutMs: 60_000,
      handle: () => new Promise<never>(() => {}),
    });
    const execution = await r.claim();
    const processing = r.pipeline.process({ taskId: r.task.id, key: r.task.key }, execution);
    await driveClockUntil(r.clock, () => r.calls.length === 1);
    await r.clock.advance(1_000);
    r.stopHandlers.abort(new Error('grace period over'));
    await runOnClock(r.clock, processing);
    expect(r.calls).toEqual([0]);
    expect(r.outcomes[0]).toMatchObject({ status: 'FAILED', attempts: 1, failure: { kind: 'aborted' } });
    expect(r.emulator.execution(execution.id)?.reports).toMatchObject([
      { status: 'FAILED', output: { error: SHUTDOWN_MESSAGE } },
    ]);
    expect(Date.parse(r.emulator.execution(execution.id)!.reports[0]!.at)).toBe(START + 1_000);
  });

  it('does not run again an execution a poll hands out while it runs; its one report goes out', async () => {
    let finish: (output: JsonObject) => void = () => undefined;
    const r = await rig({ handle: () => new Promise<JsonObject>((resolve) => (finish = resolve)) });
    const execution = await r.claim();
    const polled = { taskId: r.task.id, key: r.task.key };
    const processing = r.pipeline.process(polled, execution);
    await driveClockUntil(r.clock, () => r.calls.length === 1);
    // The service re-queued it and a poll handed it out again, twice: neither runs it.
    await r.pipeline.process(polled, execution);
    await r.pipeline.process(polled, execution);
    finish({ done: true });
    await runOnClock(r.clock, processing);
    expect(r.calls).toEqual([0]);
    expect(r.redelivered).toEqual([execution.id, execution.id]);
    expect(r.emulator.execution(execution.id)?.reports).toMatchObject([{ status: 'COMPLETED' }]);
    expect(r.events.filter((event) => event === 'claim')).toEqual(['claim']);
  });

  it('does not run again an execution finished and not yet reported while its report is retried', async () => {
    const r = await rig({ handle: () => ({ done: true }) });
    const execution = await r.claim();
    const polled = { taskId: r.task.id, key: r.task.key };
    r.emulator.setFaults([{ operation: 'executions.report', kind: 'status', status: 503, count: 2 }]);
    const processing = r.pipeline.process(polled, execution);
    await driveClockUntil(r.clock, () => r.events.includes('report attempt'));
    await r.pipeline.process(polled, execution);
    await runOnClock(r.clock, processing);
    expect(r.calls).toEqual([0]);
    expect(r.redelivered).toEqual([execution.id]);
    expect(r.emulator.execution(execution.id)?.reports).toHaveLength(1);
  });

  // A poll hands the execution out again while its report is under way (a retry's wait here; under load, the
  // GET after a 409): the claim the report answers had lapsed, and the service queued it again under its id. If
  // the service then takes the report, that claim is answered; if it refuses it, no report answers that claim.
  for (const [refusal, expected] of [
    [true, ['dead-lettered after 2', 'delivered after 1']],
    [false, ['delivered after 2']],
  ] as const) {
    it(`${refusal ? 'runs' : 'does not run'} again an execution handed out again while its report is retried, once it is ${refusal ? 'refused (409)' : 'taken'}`, async () => {
      const r = await rig({ handle: () => ({ done: true }) });
      const execution = await r.claim();
      const polled = { taskId: r.task.id, key: r.task.key };
      r.emulator.setFaults([
        { operation: 'executions.report', kind: 'status', status: 503, count: 1 },
        ...(refusal
          ? [{ operation: 'executions.report' as const, kind: 'status' as const, status: 409, count: 1 }]
          : []),
      ]);
      const processing = r.pipeline.process(polled, execution);
      await driveClockUntil(r.clock, () => r.events.includes('report attempt'));
      await r.pipeline.process(polled, execution);
      await runOnClock(r.clock, processing);
      expect(r.redelivered).toEqual([execution.id]);
      expect(r.calls).toHaveLength(refusal ? 2 : 1);
      expect(r.reported).toEqual(expected);
      expect(r.emulator.execution(execution.id)?.reports.at(-1)).toMatchObject({ status: 'COMPLETED' });
    });
  }

  it('does not run an execution handed out again while its journal record waits for the replay', async () => {
    const r = await rig({ handle: () => ({ done: true }) });
    const execution = await r.claim();
    await r.journal.recordClaim({
      executionId: execution.id,
      taskId: execution.taskId,
      taskKey: r.task.key,
      input: execution.input,
      claimedAt: new Date(START).toISOString(),
    });
    await r.pipeline.process({ taskId: r.task.id, key: r.task.key }, execution);
    expect(r.calls).toEqual([]);
    expect(r.redelivered).toEqual([execution.id]);
    expect((await r.journal.pending()).map((entry) => entry.phase)).toEqual(['claimed']);
  });

  // The report's fate is settled, only the journal is left to write (a slow disk), when a poll hands the execution
  // out again: after a 409, the claim the report answered had lapsed and the service queued it again under its
  // id; after a 200, the service handed it out anew (as after any report). No report in hand answers that claim.
  for (const [answer, write, first] of [
    [409, 'deadLetter', 'dead-lettered after 1'],
    [200, 'complete', 'delivered after 1'],
  ] as const) {
    it(`runs again an execution handed out again once its report was answered ${answer}, while the journal is written`, async () => {
      let written: () => void = () => undefined;
      let writing = false;
      const r = await rig({
        handle: () => ({ done: true }),
        beforeWrite: (name) => {
          if (name !== write || writing) return Promise.resolve();
          writing = true;
          return new Promise<void>((resolve) => (written = resolve));
        },
      });
      const execution = await r.claim();
      const polled = { taskId: r.task.id, key: r.task.key };
      if (answer === 409) {
        r.emulator.setFaults([{ operation: 'executions.report', kind: 'status', status: 409, count: 1 }]);
      }
      const processing = r.pipeline.process(polled, execution);
      await driveClockUntil(r.clock, () => writing);
      await r.pipeline.process(polled, execution);
      written();
      await runOnClock(r.clock, processing);
      expect(r.calls).toHaveLength(2);
      expect(r.redelivered).toEqual([]);
      expect(r.reported).toEqual([first, 'delivered after 1']);
      expect(r.emulator.execution(execution.id)?.reports.at(-1)).toMatchObject({ status: 'COMPLETED' });
    });
  }

  it('runs again an execution handed out again after its report', async () => {
    const r = await rig({ handle: () => ({ done: true }) });
    const execution = await r.claimAndRun();
    await runOnClock(r.clock, r.pipeline.process({ taskId: r.task.id, key: r.task.key }, execution));
    expect(r.calls).toHaveLength(2);
    expect(r.redelivered).toEqual([]);
    expect(r.reported).toEqual(['delivered after 1', 'delivered after 1']);
  });

  it('reports FAILED, without retrying, an output that lacks a declared key', async () => {
    const r = await rig({
      task: { retryCount: 3, outputKeys: ['size', 'format'] },
      handle: () => ({ size: 1 }),
    });
    const execution = await r.claimAndRun();
    expect(r.calls).toEqual([0]);
    expect(r.outcomes[0]).toMatchObject({ status: 'FAILED', failure: { kind: 'output' } });
    expect(r.emulator.execution(execution.id)?.reports[0]).toMatchObject({
      status: 'FAILED',
      output: { missingOutputKeys: ['format'] },
    });
  });

  it('retries the report after 5xx answers, counting each failed attempt in the journal first', async () => {
    const r = await rig({ handle: () => ({ done: true }) });
    r.emulator.setFaults([{ operation: 'executions.report', kind: 'status', status: 503, count: 2 }]);
    const execution = await r.claimAndRun();
    expect(r.events).toEqual([
      'claim',
      'outcome COMPLETED',
      'report sent (journal: finished COMPLETED)',
      'report attempt',
      'report sent (journal: finished COMPLETED)',
      'report attempt',
      'report sent (journal: finished COMPLETED)',
      'complete',
    ]);
    const patches = r.emulator.requests().filter((q) => q.operation === 'executions.report');
    // Report back-off at 0.5 of its ceiling: 50 ms, then 100 ms.
    expect(patches.map((q) => [q.at - START, q.status])).toEqual([
      [0, 503],
      [50, 503],
      [150, 200],
    ]);
    expect(r.emulator.execution(execution.id)?.status).toBe('COMPLETED');
    expect(r.reported).toEqual(['delivered after 3']);
  });

  it('reports FAILED instead when the service refuses the output (413), and keeps a dead letter', async () => {
    const r = await rig({ handle: () => ({ blob: 'x'.repeat(100) }) });
    r.emulator.setFaults([{ operation: 'executions.report', kind: 'status', status: 413, count: 1 }]);
    const execution = await r.claimAndRun();
    expect(r.emulator.execution(execution.id)?.reports).toMatchObject([
      { status: 'FAILED', output: { refusedStatus: 413 } },
    ]);
    expect(r.events.at(-1)).toBe('dead letter 413');
    const [letter] = await r.journal.deadLetters();
    expect(letter?.answer).toMatchObject({ status: 413 });
    expect(letter?.answer.message).toContain('df-worker reported the execution FAILED instead');
    expect(await r.journal.pending()).toEqual([]);
  });

  it('leaves the outcome in the journal when the report signal ends the retries', async () => {
    const r = await rig({ handle: () => ({ done: true }) });
    r.emulator.setFaults([{ operation: 'executions.report', kind: 'status', status: 503 }]);
    const execution = await r.claim();
    const processing = r.pipeline.process({ taskId: r.task.id, key: r.task.key }, execution);
    const patches = () => r.emulator.requests().filter((q) => q.operation === 'executions.report').length;
    await driveClockUntil(r.clock, () => patches() === 3);
    r.stopReports.abort(new Error('exit deadline'));
    await runOnClock(r.clock, processing);
    expect(patches()).toBe(3);
    expect(r.reported).toEqual(['left-in-journal after 3']);
    const [entry] = await r.journal.pending();
    expect(entry).toMatchObject({
      executionId: execution.id,
      phase: 'finished',
      outcome: { status: 'COMPLETED', output: { done: true } },
      reportAttempts: 3,
    });
  });

  // The process before a restart sent the report and died before it recorded that the service took it (an OOM
  // kill, say): its journal still holds the outcome. Replayed, it is read back first and not sent twice.
  for (const applied of [true, false]) {
    it(`replays an outcome the service ${applied ? 'already holds without sending it again' : 'does not hold yet by reporting it once'}`, async () => {
      const r = await rig({ handle: () => ({ done: true }) });
      const execution = await r.claim();
      await r.journal.recordClaim(
        {
          executionId: execution.id,
          taskId: execution.taskId,
          taskKey: r.task.key,
          input: execution.input,
          claimedAt: new Date(START).toISOString(),
        },
        {
          status: 'COMPLETED',
          output: { done: true },
          attempts: 1,
          finishedAt: new Date(START).toISOString(),
        },
      );
      const patches = () => r.emulator.requests().filter((q) => q.operation === 'executions.report').length;
      // The earlier process's report, which the service took.
      if (applied) {
        await runOnClock(
          r.clock,
          r.client.reportExecution(execution.id, { status: 'COMPLETED', output: { done: true } }),
        );
      }
      const before = patches();
      const [entry] = await r.journal.pending();
      await runOnClock(r.clock, r.pipeline.resume(entry!, 'rerun'));
      expect(patches() - before).toBe(applied ? 0 : 1);
      expect(r.emulator.execution(execution.id)?.reports).toHaveLength(1);
      expect(r.reported).toEqual([applied ? 'delivered after 0' : 'delivered after 1']);
      expect(r.calls).toEqual([]);
      expect(await r.journal.pending()).toEqual([]);
    });
  }

  it('still runs and reports an execution whose claim could not be journaled', async () => {
    const r = await rig({ handle: () => ({ done: true }), failing: ['recordClaim'] });
    const execution = await r.claimAndRun();
    expect(r.calls).toEqual([0]);
    expect(r.emulator.execution(execution.id)?.reports).toEqual([
      expect.objectContaining({ status: 'COMPLETED', output: { done: true } }),
    ]);
  });

  it('reports FAILED an execution of a task no handler here serves, naming the task', async () => {
    const r = await rig({ handle: () => ({}) });
    const other = r.emulator.createTask({ key: 'unknown-here' });
    const queued = r.emulator.enqueueExecution(other.id, {});
    await runOnClock(
      r.clock,
      r.pipeline.process(
        { taskId: other.id, key: other.key },
        {
          object: 'task_execution',
          id: queued.id,
          taskId: other.id,
          createdAt: queued.createdAt,
          status: 'IN_PROGRESS',
          input: {},
        },
      ),
    );
    expect(r.calls).toEqual([]);
    expect(r.emulator.execution(queued.id)?.reports[0]).toMatchObject({
      status: 'FAILED',
      output: { error: `no handler in this df-worker serves task ${other.id}` },
    });
  });
});
