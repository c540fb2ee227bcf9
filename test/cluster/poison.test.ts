// The poison-execution limit holds across replicas: an execution whose replica died with it
// DF_MAX_CRASHES_PER_EXECUTION times is reported FAILED by the next replica without being run again. The verdict
// waits STALL_GRACE_MS for the replica to say it only stalled (stall.test.ts): a dead one never does.
import { describe, expect, it } from 'vitest';
import { waitFor } from '../daemon/harness.ts';
import { clusterFixture } from './cluster-rig.ts';
import { clusteredTestsRun } from './redis-server.ts';

describe.runIf(clusteredTestsRun)('poison executions in clustered mode', () => {
  const cluster = clusterFixture();

  it('an execution whose replica was killed under it, at DF_MAX_CRASHES_PER_EXECUTION=1, is reported FAILED by another without running', async () => {
    const rig = await cluster.create({
      perSecond: 20,
      perMinute: 1_200,
      env: { DF_MAX_CRASHES_PER_EXECUTION: '1' },
    });
    await Promise.all(['a', 'b'].map((name) => rig.start(name)));
    rig.enqueue(1, () => ({ n: 1, ms: 60_000 }));
    let runner: string | undefined;
    await waitFor(() => {
      runner = ['a', 'b'].find((name) => rig.logsOf(name).some((l) => l.msg === 'execution claimed'));
      return runner !== undefined;
    }, 'the handler to start');
    const other = runner === 'a' ? 'b' : 'a';
    await rig.kill(runner!);
    const killedAt = Date.now();
    await waitFor(() => rig.done(), 'the execution reported', 45_000);
    console.log(
      `poison verdict ${Date.now() - killedAt} ms after the kill (lock, stalled check, stall grace)`,
    );
    const execution = rig.emulator.executions()[0]!;
    expect(execution.reports).toHaveLength(1);
    expect(execution.reports[0]).toMatchObject({
      status: 'FAILED',
      output: { errorName: 'PoisonExecution' },
    });
    expect(
      rig
        .logsOf(other)
        .some((l) => l.msg === 'poison execution: reporting it FAILED without running it again'),
    ).toBe(true);
  }, 70_000);
});
