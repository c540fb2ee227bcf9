// One trace per execution across replicas: `df-worker start` in clustered mode (real redis-server), the
// coordinator claims and puts the execution's traceparent into the job, another replica runs it and continues
// that trace. Every execution's spans, from both processes, make one tree with the queue wait in it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../daemon/harness.ts';
import { ClusterRig } from '../cluster/cluster-rig.ts';
import { clusteredTestsRun, RedisServer } from '../cluster/redis-server.ts';
import { expectExecutionTree, expectNoSecret, traceOf, tracingEnv, writeTracedHandler } from './fixtures.ts';
import { drawTree, OtlpReceiver } from './otlp-receiver.ts';

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
  afterAll(async () => {
    await rig?.dispose();
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
});
