// The pipeline listener's job-executions list, on the manual clock against the emulator (in process, the
// service's 5/s and 50/min): read at its cadence through the key's budget, it turns the first steps' idle
// polls into 6 h ones; when the list answers 404 or its runs lack a field, it is left for good, logged once,
// and every task goes back to today's planner; a minute already spent makes the list wait, never a 429.
import { describe, expect, it } from 'vitest';
import pino from 'pino';
import { Writable } from 'node:stream';
import { ManualClock } from '../../src/clock/manual-clock.ts';
import { Emulator } from '../../src/emulator/emulator.ts';
import { WorkerEvents } from '../../src/events/worker-events.ts';
import { listenForSuccessors } from '../../src/daemon/successor-listener.ts';
import { listIntervalFor } from '../../src/scheduler/job-run-watch.ts';
import { SuccessorPacing } from '../../src/scheduler/successor-pacing.ts';
import { driveClockUntil, runOnClock, serviceOnClock } from '../clock/virtual-time.ts';

const START = Date.UTC(2026, 10, 2, 9);
const KEY = 'listener-key';
const EVERY_MS = listIntervalFor(40_000);
const JOB = {
  key: 'enrich',
  tasks: [
    { name: 'acme/extract', type: 'SUB_WORKFLOW' },
    { name: 'acme/translate', type: 'SUB_WORKFLOW' },
  ],
};

// Three more jobs whose first steps are served here: the list pays from 4 tasks it stands in for.
const OTHERS = ['a', 'b', 'c'].map((task) => ({
  key: `job-${task}`,
  tasks: [{ name: `acme/${task}`, type: 'SUB_WORKFLOW' }],
}));

function setUp(polling?: () => boolean) {
  const clock = new ManualClock(START);
  const emulator = new Emulator({ clock, apiKeys: [KEY], limits: { perSecond: 5, perMinute: 50 } });
  const { budget, client } = serviceOnClock(emulator, clock, {
    apiKey: KEY,
    limits: { perSecond: 5, perMinute: 50, perMonth: 40_000 },
  });
  const jobId = String(emulator.createJob(JOB).id);
  for (const job of OTHERS) emulator.createJob(job);
  const lines: { code?: string; msg: string }[] = [];
  const logger = pino(
    { level: 'warn' },
    new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(JSON.parse(chunk.toString()) as { code?: string; msg: string });
        done();
      },
    }),
  );
  const pacing = new SuccessorPacing(clock);
  const awaited: string[] = [];
  let replans = 0;
  const stop = new AbortController();
  const events = new WorkerEvents({ freezePayloads: false });
  const listen = () =>
    listenForSuccessors(events, {
      source: client,
      pacing,
      planner: { awaitSuccessor: (task) => awaited.push(task), replan: () => replans++ },
      logger,
      served: ['extract', 'translate', 'a', 'b', 'c'],
      jobRuns: { source: client, everyMs: EVERY_MS, clock },
      ...(polling ? { polling } : {}),
      signal: stop.signal,
    });
  const lists = () => emulator.requests().filter((r) => r.operation === 'jobExecutions.list');
  const warnings = () => lines.filter((l) => l.code === 'DFW_PIPELINE_UNREADABLE');
  return {
    clock,
    emulator,
    budget,
    client,
    jobId,
    pacing,
    awaited,
    listen,
    lists,
    warnings,
    stop,
    replans,
    events,
  };
}

describe('the job-executions list in the pipeline listener', () => {
  it('stands in for the first step idle polls, one list every 259 s, each counted by the budget', async () => {
    const s = setUp();
    await runOnClock(s.clock, s.listen());
    await driveClockUntil(s.clock, () => s.lists().length >= 1);
    expect(s.pacing.listing).toBe(true);
    // extract is the job's first custom step: no idle pace while the list shows the runs.
    expect(s.pacing.rareIdleIntervalMs('extract')).toBe(6 * 3_600_000);

    await s.clock.advance(30_000);
    s.emulator.startJobRun(s.jobId);
    await driveClockUntil(s.clock, () => s.awaited.length > 0);
    expect(s.awaited).toEqual(['extract']);
    expect(s.lists().map((r) => r.at - START)).toEqual([0, EVERY_MS]);
    // Each list is one request of the key's month, and the service answered each 200.
    expect(s.budget.monthUsed).toBe(s.emulator.requests().length);
    expect(s.emulator.requests().every((r) => r.status === 200)).toBe(true);
    expect(s.warnings()).toEqual([]);
    s.stop.abort();
  });

  it('reads the list only while this process polls: in a cluster, on the coordinator alone', async () => {
    let coordinating = false;
    const s = setUp(() => coordinating);
    await runOnClock(s.clock, s.listen());
    await s.clock.advance(3 * EVERY_MS);
    // A replica that does not poll has no plan for the list to stand in for: three of them would spend
    // three quarters of the key's month on lists.
    expect(s.lists()).toEqual([]);
    expect(s.pacing.listing).toBe(false);
    coordinating = true;
    await driveClockUntil(s.clock, () => s.lists().length >= 1);
    expect(s.lists()[0]!.at - START).toBe(4 * EVERY_MS);
    expect(s.pacing.listing).toBe(true);
    s.stop.abort();
  });

  it('reads no list where it would not pay: 3 tasks it could stand in for', async () => {
    const s = setUp();
    s.emulator.reset();
    s.emulator.createJob(JOB);
    for (const job of OTHERS.slice(1)) s.emulator.createJob(job);
    await runOnClock(s.clock, s.listen());
    await s.clock.advance(3 * EVERY_MS);
    // The jobs were read (the model stands), and no list followed.
    const reads = s.emulator.requests().filter((r) => r.operation === 'jobs.list');
    expect(reads.map((r) => r.status)).toEqual([200]);
    expect(s.lists()).toEqual([]);
    expect(s.pacing.listing).toBe(false);
    expect(s.pacing.rareIdleIntervalMs('extract')).toBeUndefined();
    s.stop.abort();
  });

  it('leaves the list after a 404, logged once: the first step goes back to the idle pace', async () => {
    const s = setUp();
    s.emulator.setFaults([{ kind: 'status', status: 404, operation: 'jobExecutions.list' }]);
    await runOnClock(s.clock, s.listen());
    await driveClockUntil(s.clock, () => s.warnings().length > 0);
    expect(s.pacing.listing).toBe(false);
    expect(s.pacing.rareIdleIntervalMs('extract')).toBeUndefined();
    // No further list request, however long it runs: nothing waits on the clock to read it again.
    expect(s.clock.pending).toBe(0);
    await s.clock.advance(10 * EVERY_MS);
    expect(s.lists()).toHaveLength(1);
    expect(s.warnings()).toHaveLength(1);
    expect(s.warnings()[0]!.msg).toMatch(/answered 404/);
    s.stop.abort();
  });

  it('leaves the list once when its runs lack a field, after it had been used', async () => {
    const s = setUp();
    await runOnClock(s.clock, s.listen());
    await driveClockUntil(s.clock, () => s.lists().length >= 1);
    expect(s.pacing.listing).toBe(true);
    s.emulator.startJobRun(s.jobId, { status: null });
    await driveClockUntil(s.clock, () => s.warnings().length > 0);
    expect(s.pacing.listing).toBe(false);
    expect(s.pacing.rareIdleIntervalMs('extract')).toBeUndefined();
    expect(s.warnings()[0]!.msg).toMatch(/status/);
    expect(s.clock.pending).toBe(0);
    await s.clock.advance(5 * EVERY_MS);
    expect(s.lists()).toHaveLength(2);
    expect(s.warnings()).toHaveLength(1);
    s.stop.abort();
  });

  it('waits for the minute when 50 requests were sent in it: no 429', async () => {
    const s = setUp();
    // The minute's 50 requests spent by other calls, through the same budget.
    await runOnClock(s.clock, Promise.all(Array.from({ length: 50 }, () => s.client.listJobs())));
    await runOnClock(s.clock, s.listen());
    await driveClockUntil(s.clock, () => s.lists().length >= 1);
    const [list] = s.lists();
    expect(list!.status).toBe(200);
    expect(list!.at - START).toBeGreaterThanOrEqual(60_000);
    expect(s.emulator.requests().filter((r) => r.status === 429)).toEqual([]);
    s.stop.abort();
  });

  it('reads jobs that gave nothing usable again only every 7th task list refresh', async () => {
    const s = setUp();
    s.emulator.reset();
    await runOnClock(s.clock, s.listen());
    const jobReads = () => s.emulator.requests().filter((r) => r.operation === 'jobs.list').length;
    expect(jobReads()).toBe(1);
    const served = ['extract', 'translate', 'a', 'b', 'c'];
    for (let i = 0; i < 6; i++) s.events.emit('tasks', { served, withoutTask: [] });
    await driveClockUntil(s.clock, () => true);
    expect(jobReads()).toBe(1);
    s.events.emit('tasks', { served, withoutTask: [] });
    await driveClockUntil(s.clock, () => jobReads() === 2);
    // Once the jobs are usable, each refresh reads them again.
    s.emulator.createJob(JOB);
    for (let i = 0; i < 7; i++) s.events.emit('tasks', { served, withoutTask: [] });
    await driveClockUntil(s.clock, () => jobReads() >= 3);
    // An account with no job yet is no degrade: no warning (an info line, see pipeline-source.test.ts).
    expect(s.warnings()).toEqual([]);
    s.stop.abort();
  });
});
