// Issue 28, an execution the service hands out again after its report: each claim is its own job (execution id and
// claim instant), so the second claim runs and is reported, as standalone does; a second add of one claim is not.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Queue } from 'bullmq';
import { afterAll, describe, expect, it } from 'vitest';
import { claimJobId, type ExecutionJobData } from '../../src/clustered/queue-journal.ts';
import type { EmulatedExecution } from '../../src/emulator/index.ts';
import { waitFor } from '../daemon/harness.ts';
import { forwardToService } from '../faults/slow-answers-proxy.ts';
import { clusterFixture } from './cluster-rig.ts';
import { clusteredTestsRun } from './redis-server.ts';

/** In front of the emulator: answers one poll of `again`'s task with `again` (as reported) handed out anew. */
async function reissuingProxy(target: string, again: () => EmulatedExecution | undefined): Promise<Server> {
  let reissued = false;
  const server = createServer((incoming, outgoing) => {
    const execution = again();
    if (!reissued && execution && incoming.url?.endsWith(`/tasks/${execution.taskId}/poll`)) {
      reissued = true;
      const {
        reports: _reports,
        claimedAt: _claimedAt,
        taskKey: _taskKey,
        output: _output,
        ...rest
      } = execution;
      outgoing.writeHead(200, { 'content-type': 'application/json' });
      outgoing.end(JSON.stringify({ ...rest, status: 'IN_PROGRESS' }));
      return;
    }
    void forwardToService(new URL(target), incoming).then(
      (answer) => {
        outgoing.writeHead(answer.status, answer.headers);
        outgoing.end(answer.body);
      },
      () => outgoing.destroy(),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return server;
}

describe.runIf(clusteredTestsRun)('an execution handed out again after its report', () => {
  const cluster = clusterFixture();
  let proxy: Server | undefined;
  afterAll(async () => {
    proxy?.closeAllConnections();
    await new Promise((resolve) => proxy?.close(resolve));
  });

  it('runs again and is reported again; each other execution once, no 429', async () => {
    const rig = await cluster.create({ perSecond: 5, perMinute: 300 });
    const handedOut: { id?: string } = {};
    const reports = () => rig.emulator.execution(handedOut.id!)!.reports;
    proxy = await reissuingProxy(rig.emulator.url, () =>
      handedOut.id === undefined ? undefined : rig.emulator.execution(handedOut.id),
    );
    const url = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
    await Promise.all(['a', 'b'].map((name) => rig.start(name, { DF_API_URL: url })));
    rig.enqueue(6, (n) => ({ n, ms: 20 }));
    await waitFor(() => rig.done(), 'every execution reported', 30_000);
    // Handed out again once reported (the proxy answers the next poll of its task with it).
    handedOut.id = rig.emulator.executions()[0]!.id;
    rig.enqueue(3, (n) => ({ n, ms: 20 }));
    await waitFor(
      () => reports().length >= 2 && rig.done(),
      'the execution handed out again to be reported again',
      20_000,
    ).catch(() => undefined);
    const figures = rig.figures();
    console.log(
      `re-issued ${handedOut.id}: reported ${reports().length} times; all: ${JSON.stringify(figures)}`,
    );
    expect(reports()).toHaveLength(2);
    expect(reports().map((r) => r.status)).toEqual(['COMPLETED', 'COMPLETED']);
    expect(figures).toMatchObject({ claimed: 9, reported: 9, duplicated: 1, lost: 0, rateLimited: 0 });
    expect(figures.maxPerSecond).toBeLessThanOrEqual(5);
  }, 60_000);

  it('a second add of the same claim is one job; another claim of the same execution is another', async () => {
    const queue = new Queue<ExecutionJobData>('reissue-unit', {
      prefix: 'unit',
      connection: { host: '127.0.0.1', port: cluster.redis().port },
    });
    try {
      const claim = (claimedAt: string): ExecutionJobData => ({
        taskId: 't',
        taskKey: 'alpha',
        executionId: 'execution-1',
        input: {},
        createdAt: claimedAt,
        claimedAt,
      });
      const once = claim('2026-11-27T00:00:00.000Z');
      await queue.add('execution', once, { jobId: claimJobId(once) });
      await queue.add('execution', once, { jobId: claimJobId(once) });
      const again = claim('2026-11-27T00:00:05.000Z');
      await queue.add('execution', again, { jobId: claimJobId(again) });
      expect(await queue.count()).toBe(2);
    } finally {
      await queue.obliterate({ force: true });
      await queue.close();
    }
  });
});
