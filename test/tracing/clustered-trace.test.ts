// One trace per execution across replicas: `df-worker start` in clustered mode (real redis-server), the
// coordinator claims and puts the execution's traceparent into the job, another replica runs it and continues
// that trace. Every execution's spans, from both processes, make one tree with the queue wait in it.
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../daemon/harness.ts';
import { ClusterRig } from '../cluster/cluster-rig.ts';
import { clusteredTestsRun, RedisServer } from '../cluster/redis-server.ts';
import { expectExecutionTree, expectNoSecret, traceOf, tracingEnv, writeTracedHandler } from './fixtures.ts';
import { drawTree, OtlpReceiver, type ReceivedSpan } from './otlp-receiver.ts';

const EXECUTIONS = 6;

describe.runIf(clusteredTestsRun)('traces in clustered mode (real processes, real Redis)', () => {
  let redis: RedisServer;
  let rig: ClusterRig | undefined;
  let receiver: OtlpReceiver;

  beforeAll(async () => {
    redis = await RedisServer.start();
    receiver = new OtlpReceiver();
    await receiver.listen();
  });
  afterEach(async () => {
    await rig?.dispose();
    rig = undefined;
  });
  afterAll(async () => {
    await receiver?.close();
    await redis?.dispose();
  });

  it('continues each execution trace on the replica that runs it: one tree, queue wait included', async () => {
    rig = await ClusterRig.create({
      redis,
      perSecond: 20,
      perMinute: 1_200,
      env: { ...tracingEnv(receiver.url), DF_RETRY_BASE_MS: '50' },
    });
    await writeTracedHandler(rig.dir, rig.apiKey);
    rig.emulator.createTask({ key: 'traced', retryCount: 1, inputKeys: [{ key: 'n', description: '' }] });
    // a coordinates alone first and runs one execution at a time; b runs four: most run off the coordinator.
    await rig.start('a', { DF_CONCURRENCY: '1' });
    await waitFor(() => rig!.coordinator() === 'a', 'a to coordinate', 15_000);
    await rig.start('b', { DF_CONCURRENCY: '4' });
    const executions = Array.from({ length: EXECUTIONS }, (_, i) =>
      rig!.emulator.enqueueExecution('traced', { n: 7 }, { jobId: `job-${i}` }),
    );
    const reported = (id: string) => traceOf(receiver.spans, id).some((s) => s.name === 'df-worker.report');
    const complete = (id: string) => traceOf(receiver.spans, id).some((s) => s.name === 'df-worker.poll');
    await waitFor(
      () => executions.every((e) => reported(e.id) && complete(e.id)),
      'every execution trace',
      45_000,
    );

    let offCoordinator = 0;
    for (const [i, execution] of executions.entries()) {
      const spans = traceOf(receiver.spans, execution.id);
      const { root, poll } = expectExecutionTree(spans, {
        executionId: execution.id,
        secret: rig.apiKey,
        serviceUrl: rig.emulator.url,
        jobId: `job-${i}`,
      });
      const queue = spans.filter((s) => s.name === 'df-worker.queue');
      expect(queue, drawTree(spans)).toHaveLength(1);
      expect(queue[0]!.parentSpanId).toBe(root.spanId);
      const claimedBy = queue[0]!.attributes['df_worker.replica.claimed_by'];
      const runBy = queue[0]!.attributes['df_worker.replica.run_by'];
      // The poll left from the coordinator; the root, attempts and report from the replica that ran it.
      expect(claimedBy).toBe('a');
      expect(poll.resource['service.instance.id']).toBe(claimedBy);
      expect(root.resource['service.instance.id']).toBe(runBy);
      expect(root.attributes['df_worker.replica']).toBe(runBy);
      if (runBy !== claimedBy) offCoordinator++;
      if (i === 0 || (runBy !== claimedBy && offCoordinator === 1))
        console.log(
          `execution ${i}, claimed by ${String(claimedBy)}, run by ${String(runBy)}:\n${drawTree(spans)}`,
        );
    }
    console.log(`${offCoordinator} of ${EXECUTIONS} executions ran on a replica other than the claiming one`);
    expect(offCoordinator).toBeGreaterThan(0);
    expectNoSecret(receiver.bodies, rig.apiKey);
  }, 90_000);

  it('keeps one tree when the replica running an execution is killed and another takes it up', async () => {
    // A new emulator numbers its executions from the start again: the first test's spans would match.
    receiver.spans.length = 0;
    receiver.bodies.length = 0;
    rig = await ClusterRig.create({
      redis,
      perSecond: 20,
      perMinute: 1_200,
      concurrency: 1,
      env: tracingEnv(receiver.url),
    });
    await writeFile(
      path.join(rig.dir, 'handlers', 'slow.ts'),
      `import { defineTask } from 'df-worker';
export default defineTask({
  key: 'slow',
  handle: async () => {
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    return {};
  },
});
`,
    );
    rig.emulator.createTask({ key: 'slow' });
    await Promise.all(['a', 'b'].map((name) => rig!.start(name)));
    const execution = rig.emulator.enqueueExecution('slow', {});
    const queued = (runBy: string) =>
      receiver.spans.some(
        (s) =>
          s.name === 'df-worker.queue' &&
          s.attributes['df_worker.execution.id'] === execution.id &&
          s.attributes['df_worker.replica.run_by'] === runBy,
      );
    // The first replica's queue span has left: it runs the handler, and is killed in the middle of it.
    let victim: string | undefined;
    await waitFor(
      () =>
        (victim = ['a', 'b'].find((name) => rig!.runningOn(name).includes(execution.id) && queued(name))) !==
        undefined,
      'a replica running the execution',
      20_000,
    );
    await rig.kill(victim!);
    const survivor = victim === 'a' ? 'b' : 'a';
    await waitFor(
      () => traceOf(receiver.spans, execution.id).some((s) => s.name === 'df-worker.report'),
      'the report of the replica that took it up',
      45_000,
    );
    const spans = traceOf(receiver.spans, execution.id);
    const tree = drawTree(spans);
    console.log(`taken up by ${survivor} after ${victim!} was killed:\n${tree}`);
    const roots = spans.filter((s) => s.parentSpanId === undefined);
    expect(
      roots.map((s) => s.name),
      tree,
    ).toEqual(['df-worker.execution']);
    expect(roots[0]!.attributes).toMatchObject({ 'df_worker.resumed': true, 'df_worker.replica': survivor });
    // One tree: every other span's parent is a span of it, whichever replica exported it.
    const ids = new Set(spans.map((s) => s.spanId));
    expect(
      spans.filter((s) => s.parentSpanId !== undefined && !ids.has(s.parentSpanId)),
      tree,
    ).toEqual([]);
    const runBy = (s: ReceivedSpan) => s.attributes['df_worker.replica.run_by'];
    expect(
      spans
        .filter((s) => s.name === 'df-worker.queue')
        .map(runBy)
        .sort(),
    ).toEqual([victim, survivor].sort());
    expect(spans.filter((s) => s.name === 'df-worker.poll')).toHaveLength(1);
    expect(spans.find((s) => s.name === 'df-worker.report')?.attributes['df_worker.report.result']).toBe(
      'delivered',
    );
  }, 90_000);
});
