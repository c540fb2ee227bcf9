// Issue 36, item 2 in clustered mode: the coordinator claims, replicas run. An execution the service hands out
// again while a replica runs it is not queued again: run once, reported once, counted and logged once.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import type { EmulatedExecution } from '../../src/emulator/index.ts';
import { clusterFixture } from '../cluster/cluster-rig.ts';
import { clusteredTestsRun } from '../cluster/redis-server.ts';
import { waitFor } from '../daemon/harness.ts';
import { forwardToService } from './slow-answers-proxy.ts';

const QUEUE_REDELIVERED_LOG =
  'a poll handed out again an execution whose job is not finished (the service re-queued it): it is not ' +
  'queued again; that job reports it once';

/** In front of the emulator: answers one poll of its task with `running()` while it runs (claimed, unreported). */
async function redeliveringProxy(
  target: string,
  running: () => EmulatedExecution | undefined,
): Promise<Server> {
  let redelivered = false;
  const server = createServer((incoming, outgoing) => {
    const execution = running();
    if (
      !redelivered &&
      execution?.claimedAt !== undefined &&
      execution.reports.length === 0 &&
      incoming.url?.endsWith(`/tasks/${execution.taskId}/poll`)
    ) {
      redelivered = true;
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

describe.runIf(clusteredTestsRun)('an execution handed out again while a replica runs it (clustered)', () => {
  const cluster = clusterFixture();
  let proxy: Server | undefined;
  afterAll(async () => {
    proxy?.closeAllConnections();
    await new Promise((resolve) => proxy?.close(resolve));
  });

  it('is not queued again: one run, one report, counted and logged once', async () => {
    const rig = await cluster.create({ perSecond: 5, perMinute: 50 });
    const tracked: { id?: string } = {};
    proxy = await redeliveringProxy(rig.emulator.url, () =>
      tracked.id === undefined ? undefined : rig.emulator.execution(tracked.id),
    );
    const url = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
    rig.enqueue(1, (n) => ({ n, ms: 2_500 }));
    tracked.id = rig.emulator.executions()[0]!.id;
    await Promise.all(['a', 'b'].map((name) => rig.start(name, { DF_API_URL: url })));
    const id = tracked.id;
    await waitFor(() => rig.done(), 'the execution reported', 30_000);
    const handedOutAgain = () =>
      ['a', 'b'].some((n) => rig.logsOf(n).some((l) => l.msg === QUEUE_REDELIVERED_LOG));
    // A second run would have started by now had the claim been queued again; a second report would be in.
    await waitFor(() => rig.emulator.execution(id)!.reports.length > 1, 'a second report', 1_500).catch(
      () => undefined,
    );
    const runs = ['a', 'b'].flatMap((n) =>
      rig.logsOf(n).filter((l) => l.msg === 'execution claimed' && l.executionId === id),
    ).length;
    const logged = ['a', 'b'].flatMap((n) =>
      rig.logsOf(n).filter((l) => l.msg === QUEUE_REDELIVERED_LOG && l.executionId === id),
    ).length;
    const counted = (await Promise.all(['a', 'b'].map((n) => rig.metrics(n))))
      .flatMap((text) => [...text.matchAll(/^dfworker_redelivered_total\{[^}]*\} (\S+)$/gm)])
      .reduce((sum, [, value]) => sum + Number(value), 0);
    const figures = rig.figures();
    console.log(
      `clustered redelivery of ${id}: runs ${runs}, reports ${rig.emulator.execution(id)!.reports.length}, ` +
        `logged ${logged}, counted ${counted}; ${JSON.stringify(figures)}`,
    );
    expect(handedOutAgain()).toBe(true);
    expect(runs).toBe(1);
    expect(rig.emulator.execution(id)!.reports).toHaveLength(1);
    expect(logged).toBe(1);
    expect(counted).toBe(1);
    expect(figures).toMatchObject({ lost: 0, duplicated: 0, rateLimited: 0 });
  }, 60_000);
});
