// The job definitions read from the service (the emulator, in process, through the budget) into successor
// pacing on the manual clock: a reported step brings its successor's poll forward from the next idle poll to
// a second after the report; and when the jobs cannot be read, pacing is off (today's planner), logged once.
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock/manual-clock.ts';
import { Emulator } from '../../src/emulator/index.ts';
import { PipelineSource } from '../../src/scheduler/pipeline-source.ts';
import { SuccessorPacing } from '../../src/scheduler/successor-pacing.ts';
import { serviceOnClock } from '../clock/virtual-time.ts';

const KEY = 'pipeline-key';
const LIMITS = { perSecond: 5, perMinute: 50, perMonth: 40_000 };

/** The service's example job (Product-Live/data-factory-task-example, job/job.json), with a second step. */
const EXAMPLE_JOB = {
  schema: '1.0',
  key: 'run-task',
  title: 'Run my task',
  tasks: [
    {
      name: 'acme/example-task',
      taskReferenceName: 'task',
      description: 'Process my data',
      optional: false,
      type: 'SUB_WORKFLOW',
      inputParameters: {},
    },
    { name: 'wait', taskReferenceName: 'wait', type: 'WAIT', inputParameters: {} },
    { name: 'acme/publish', taskReferenceName: 'publish', type: 'SUB_WORKFLOW', inputParameters: {} },
  ],
};

function setUp() {
  const clock = new ManualClock(Date.UTC(2026, 10, 2, 9));
  const emulator = new Emulator({ clock, apiKeys: [KEY], limits: LIMITS });
  const { budget, client } = serviceOnClock(emulator, clock, { apiKey: KEY, limits: LIMITS });
  const warnings: { code?: string; message: string; fields: object }[] = [];
  const infos: string[] = [];
  const logger = {
    warn: (o: { code?: string }, message: string) => warnings.push({ code: o.code, message, fields: o }),
    info: (_: object, message: string) => infos.push(message),
  };
  const source = new PipelineSource(client, ['example-task', 'publish'], logger);
  return { clock, emulator, budget, client, source, warnings, infos };
}

describe('the pipeline read from the job definitions', () => {
  it('brings the successor poll forward to a second after the step before it was reported', async () => {
    const { clock, emulator, client, source, warnings } = setUp();
    emulator.createJob(EXAMPLE_JOB);
    const publish = emulator.createTask({ key: 'publish' });
    const model = await source.read();
    expect(warnings).toEqual([]);
    const successor = model!.successorOf('run-task', 0)!;
    expect(successor).toMatchObject({ task: 'publish', to: 2, builtInsBetween: 1 });
    // The job definitions took one request, counted in the budget like any other.
    expect(emulator.requests().map((r) => r.operation)).toEqual(['jobs.list']);

    const pacing = new SuccessorPacing(clock);
    const reportedAt = clock.now();
    pacing.reported(successor, 'job-1');
    // Without the pipeline, publish waits for its next idle poll (10 min on a quiet task, say); with it:
    expect(pacing.nextPollAt('publish')! - reportedAt).toBe(1_000);
    // The wait step ends 30 s after the report: publish's execution is created then.
    let claimedAt: number | undefined;
    let created = false;
    while (claimedAt === undefined) {
      const at = pacing.nextPollAt('publish')!;
      if (!created && at >= reportedAt + 30_000) {
        await clock.advance(reportedAt + 30_000 - clock.now());
        emulator.enqueueExecution(publish.id, {}, { jobId: 'job-1' });
        created = true;
      }
      await clock.advance(at - clock.now());
      const execution = await client.pollTask(publish.id);
      if (execution) {
        claimedAt = clock.now();
        // The execution's input carries the job context: it ties the claim to its job's run.
        const { jobId } = execution.input.context as { jobId: string };
        expect(pacing.arrived('publish', Date.parse(execution.createdAt), jobId)).toBe(true);
      } else pacing.polled('publish');
    }
    expect((claimedAt - reportedAt) / 1000).toBe(45);
    expect(pacing.delaysOf(successor)).toEqual([30_000]);
    expect(pacing.nextPollAt('publish')).toBeUndefined();
  });

  it("degrades to today's planner, logged once, when the jobs cannot be read or hold nothing usable", async () => {
    const { emulator, source, warnings } = setUp();
    emulator.setFaults([{ operation: 'jobs.list', kind: 'status', status: 404 }]);
    expect(await source.read()).toBeUndefined();
    expect(await source.read()).toBeUndefined();
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ code: 'DFW_PIPELINE_UNREADABLE' });
    expect(warnings[0]!.message).toMatch(/Successor pacing is off: the job definitions could not be read/);
    // An answer the service may give, not a defect here: the code and the message, no error and its stack.
    expect(Object.keys(warnings[0]!.fields)).toEqual(['code']);

    const other = setUp();
    other.emulator.createJob({ key: 'no-steps', title: 'a job whose tasks are not listed' });
    expect(await other.source.read()).toBeUndefined();
    expect(other.warnings.map((w) => w.message)).toEqual([
      'Successor pacing is off: none of the 1 jobs listed has a "key" and a "tasks" array of {name, type}; ' +
        'tasks are polled by their own arrivals only.',
    ]);
  });

  it('takes an account with no job yet as normal: one info line, no warning, read again later', async () => {
    const { emulator, source, warnings, infos } = setUp();
    expect(await source.read()).toBeUndefined();
    expect(await source.read()).toBeUndefined();
    expect(warnings).toEqual([]);
    expect(infos).toEqual([
      'Successor pacing waits for a job: the service lists none yet; tasks are polled by their own arrivals.',
    ]);
    // The job defined since is read at the next read.
    emulator.createJob(EXAMPLE_JOB);
    expect((await source.read())!.successorOf('run-task', 0)).toMatchObject({ task: 'publish' });
  });
});
