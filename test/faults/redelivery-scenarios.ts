// Issue 36's row "the execution being run delivered again by a poll (the service re-queued it)", against the
// real `df-worker start` and the emulator on loopback at the service's limits. Standalone: the next two polls of
// the task are answered with one execution, so the second hands it out while its handler still runs. Clustered:
// a proxy answers the coordinator's poll with the execution a replica runs.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { EmulatedExecution } from '../../src/emulator/index.ts';
import { ClusterRig } from '../cluster/cluster-rig.ts';
import { RedisServer } from '../cluster/redis-server.ts';
import type { Issue36OnceResult } from './issue-36-once-scenarios.ts';
import { budgetFigures, figuresOf, withRig, type Daemon, type Tally } from './rig.ts';
import { forwardToService } from './slow-answers-proxy.ts';

const DAEMON_LIMITS = {
  DF_BUDGET_PER_SECOND: '5',
  DF_BUDGET_PER_MINUTE: '50',
  DF_BUDGET_SAFETY_MARGIN_MS: '200',
  // A month far larger than the test's so that the task is polled every few hundred ms while its handler runs.
  DF_BUDGET_PER_MONTH: '5000000',
  DF_MAX_POLL_INTERVAL_MS: '300',
};
/** How long the handler runs: long enough for polls to come while it does. */
const HANDLER_MS = 2_000;
const REDELIVERED_LOG =
  'a poll handed out again an execution this worker still owes a report for (the service re-queued it): ' +
  'it is not run again; the claim in hand reports it once';

/** dfworker_redelivered_total summed over its labels, as the daemon's /metrics shows it now. */
export async function redeliveredCount(daemon: Daemon): Promise<number> {
  const text = await (await fetch(`${daemon.healthUrl()}/metrics`)).text();
  let total = 0;
  for (const [, value] of text.matchAll(/^dfworker_redelivered_total\{[^}]*\} (\S+)$/gm))
    total += Number(value);
  return total;
}

/** The service hands out the execution being run a second time; it runs once and is reported once. */
export async function redeliveredWhileRunning(): Promise<Issue36OnceResult> {
  return withRig({ limits: { perSecond: 5, perMinute: 50 }, env: DAEMON_LIMITS }, async (rig) => {
    const [id] = rig.enqueue(1, { delayMs: HANDLER_MS }) as [string];
    // Claimed here, then handed to the daemon by its next two polls: the second while the handler runs.
    const answer = await rig.claimOutOfBand(rig.taskId);
    rig.emulator.setFaults([
      {
        operation: 'tasks.poll',
        taskId: rig.taskId,
        kind: 'status',
        status: 200,
        body: JSON.stringify(answer),
        contentType: 'application/json',
        count: 2,
      },
    ]);
    const daemon = rig.start();
    await rig.started(daemon);
    const reported = await rig.waitUntil(() => rig.reportsOf(id).length > 0, 15_000);
    // Both answers given, and a second report (had one gone out) would have had time to arrive.
    const handedOut = rig.emulator
      .requests()
      .filter((r) => r.path.endsWith(`/tasks/${rig.taskId}/poll`) && r.status === 200).length;
    await rig.waitUntil(() => rig.reportsOf(id).length > 1, 1_500);
    const runs = (await rig.runs()).get(id) ?? 0;
    const counted = await redeliveredCount(daemon);
    const logged = daemon
      .logs()
      .filter((line) => line.msg === REDELIVERED_LOG && line.executionId === id).length;
    const journalErrors = daemon
      .logs()
      .filter((line) => line.msg === 'could not journal the outcome; reporting it anyway').length;
    const reports = rig.reportsOf(id).length;
    await daemon.terminate();
    const tally = rig.tally();
    const completed =
      reported && handedOut >= 2 && runs === 1 && reports === 1 && counted === 1 && logged === 1;
    return {
      completed,
      figures: figuresOf(tally),
      tally,
      budget: budgetFigures(rig),
      detail:
        `handed out ${handedOut} times; handler runs ${runs}; reports ${reports}; ` +
        `dfworker_redelivered_total ${counted}; logged ${logged}; outcome journal errors ${journalErrors}`,
      runs,
      reports,
    };
  });
}

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

/**
 * Clustered: two replicas on one redis-server, the coordinator's next poll of the task answered (by a proxy)
 * with the execution a replica runs. It is not queued again: run once, reported once.
 */
export async function redeliveredWhileReplicaRuns(): Promise<Issue36OnceResult> {
  const redis = await RedisServer.start();
  const rig = await ClusterRig.create({ redis, perSecond: 5, perMinute: 50 });
  const tracked: { id?: string } = {};
  const proxy = await redeliveringProxy(rig.emulator.url, () =>
    tracked.id === undefined ? undefined : rig.emulator.execution(tracked.id),
  );
  try {
    const url = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
    rig.enqueue(1, (n) => ({ n, ms: 2_500 }));
    const id = rig.emulator.executions()[0]!.id;
    tracked.id = id;
    await Promise.all(['a', 'b'].map((name) => rig.start(name, { DF_API_URL: url })));
    const until = async (condition: () => boolean, ms: number) => {
      const deadline = Date.now() + ms;
      while (!condition() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
      return condition();
    };
    const reportsOf = () => rig.emulator.execution(id)!.reports;
    const reported = await until(() => reportsOf().length > 0, 30_000);
    // A second run would have started by now had the claim been queued again; a second report would be in.
    await until(() => reportsOf().length > 1, 1_500);
    const logsOf = (msg: string) =>
      ['a', 'b'].flatMap((name) => rig.logsOf(name).filter((l) => l.msg === msg && l.executionId === id))
        .length;
    const runs = logsOf('execution claimed');
    const logged = logsOf(QUEUE_REDELIVERED_LOG);
    const counted = (await Promise.all(['a', 'b'].map((name) => rig.metrics(name))))
      .flatMap((text) => [...text.matchAll(/^dfworker_redelivered_total\{[^}]*\} (\S+)$/gm)])
      .reduce((sum, [, value]) => sum + Number(value), 0);
    const f = rig.figures();
    const executions = rig.emulator.executions();
    const tally: Tally = {
      claimed: f.claimed,
      reported: f.reported,
      duplicated: f.duplicated,
      lost: f.lost,
      wrong: executions.flatMap((e) => e.reports).filter((r) => r.status !== 'COMPLETED').length,
      unclaimed: executions.filter((e) => e.claimedAt === undefined && e.reports.length === 0).length,
    };
    const reports = reportsOf().length;
    return {
      completed: reported && runs === 1 && reports === 1 && logged === 1 && counted === 1,
      figures: figuresOf(tally),
      tally,
      budget: {
        rateLimited: f.rateLimited,
        maxPerSecond: f.maxPerSecond,
        maxPerMinute: f.maxPerMinute,
        requests: rig.emulator.requests().length,
      },
      detail: `clustered, 2 replicas: handler runs ${runs}; reports ${reports}; logged ${logged}; dfworker_redelivered_total ${counted}`,
      runs,
      reports,
    };
  } finally {
    proxy.closeAllConnections();
    await new Promise((resolve) => proxy.close(resolve));
    await rig.dispose();
    await redis.dispose();
  }
}
