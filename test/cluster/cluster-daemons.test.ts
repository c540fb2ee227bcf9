// Three real `df-worker start` processes in clustered mode on one emulator key and one redis-server. The limits
// are raised (emulator and daemons alike) so that 150 executions fit in seconds; the test checks the emulator's
// own count of every window against them. 150, not the 300 it once ran: their 300 requests hold the shared
// per-second window full for 5 s, each replica taking part, the same point at half the CPU (three daemons on a
// 2-core machine).
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../daemon/harness.ts';
import { ClusterRig } from './cluster-rig.ts';
import { clusteredTestsRun, RedisServer } from './redis-server.ts';

const PER_SECOND = 60;
const PER_MINUTE = 3_600;
const EXECUTIONS = 150;
/** How long before the coordinator's kill a claim at the service may still have been on its way to Redis, in ms. */
const KILL_WINDOW_MS = 2_000;

describe.runIf(clusteredTestsRun)('three replicas on one key (real processes, real Redis)', () => {
  let redis: RedisServer;
  let rig: ClusterRig | undefined;

  beforeAll(async () => {
    redis = await RedisServer.start();
  });
  afterEach(async () => {
    await rig?.dispose();
    rig = undefined;
  });
  afterAll(async () => {
    await redis?.dispose();
  });

  it(`${EXECUTIONS} executions across 3 tasks: each reported once, no 429, within the windows, on every replica`, async () => {
    rig = await ClusterRig.create({ redis, perSecond: PER_SECOND, perMinute: PER_MINUTE });
    await Promise.all(['a', 'b', 'c'].map((name) => rig!.start(name)));
    const started = Date.now();
    rig.enqueue(EXECUTIONS);
    await waitFor(() => rig!.done(), 'every execution reported', 40_000);
    const figures = rig.figures();
    const byReplica = rig.reportsByReplica();
    console.log(
      `${EXECUTIONS} executions: ${JSON.stringify(figures)} in ${Date.now() - started} ms; reports by replica ${JSON.stringify(Object.fromEntries(byReplica))}`,
    );
    expect(figures).toMatchObject({
      claimed: EXECUTIONS,
      reported: EXECUTIONS,
      duplicated: 0,
      lost: 0,
      rateLimited: 0,
    });
    expect(figures.maxPerSecond).toBeLessThanOrEqual(PER_SECOND);
    expect(figures.maxPerMinute).toBeLessThanOrEqual(PER_MINUTE);
    for (const name of ['a', 'b', 'c']) expect(byReplica.get(name) ?? 0).toBeGreaterThan(0);
  }, 60_000);

  it('kill -9 of a replica mid-handler and then of the coordinator: the survivor takes over; nothing lost', async () => {
    rig = await ClusterRig.create({ redis, perSecond: PER_SECOND, perMinute: PER_MINUTE });
    await Promise.all(['a', 'b', 'c'].map((name) => rig!.start(name)));
    rig.enqueue(45, (n) => ({ n, ms: 400 }));
    await waitFor(() => rig!.coordinator() !== undefined, 'a coordinator', 10_000);
    const coordinator = rig.coordinator()!;
    const [victim, survivor] = ['a', 'b', 'c'].filter((name) => name !== coordinator) as [string, string];
    // A handler running on a replica that does not coordinate: killed with its replica.
    let running: string | undefined;
    await waitFor(() => {
      const claimed = rig!
        .logsOf(victim)
        .filter((l) => l.msg === 'execution claimed')
        .map((l) => l.executionId);
      const reported = new Set(
        rig!
          .logsOf(victim)
          .filter((l) => l.msg === 'execution reported')
          .map((l) => l.executionId),
      );
      running = claimed.find((id) => !reported.has(id)) as string | undefined;
      return running !== undefined;
    }, `a handler running on ${victim}`);
    const victimKilledAt = Date.now();
    await rig.kill(victim);
    await waitFor(() => rig!.figures().reported >= 15, 'a third reported', 20_000);
    const killedAt = Date.now();
    await rig.kill(coordinator);
    const killDoneAt = Date.now();
    // The window no client can close (README, Guarantees): the service answered a poll with an execution, and the
    // coordinator died before Redis took the claim. Such an execution is claimed at the service within moments of
    // the kill and never reported; any other unreported one is lost by a fault of ours.
    const inKillWindow = (e: { claimedAt?: string; reports: unknown[] }) =>
      e.reports.length === 0 &&
      e.claimedAt !== undefined &&
      Date.parse(e.claimedAt) >= killedAt - KILL_WINDOW_MS &&
      Date.parse(e.claimedAt) <= killDoneAt + 500;
    await waitFor(() => rig!.coordinator() === survivor, `${survivor} to take over`, 15_000);
    const tookAt = Date.parse(
      rig.logsOf(survivor).findLast((l) => l.msg === 'took the coordinator lease: polling for the cluster')!
        .time as string,
    );
    // Generous: the survivor drains the rest in seconds on a quiet machine, several times slower on a loaded one.
    const unreported = () => rig!.emulator.executions().filter((e) => e.reports.length === 0);
    await waitFor(() => unreported().every(inKillWindow), 'every execution reported', 60_000).catch(
      (error: Error) => {
        const owed = unreported().map(
          (e) => `${e.id} claimed at ${e.claimedAt ? Date.parse(e.claimedAt) - killedAt : '-'} ms`,
        );
        throw new Error(
          `${error.message}: ${JSON.stringify(rig!.figures())}, coordinator ${rig!.coordinator()}; ` +
            `unreported (times from the coordinator's kill): ${owed.join(', ')}`,
        );
      },
    );
    // An execution of the kill window still has a lock's life and a stall check to be taken up, had Redis held it.
    if (!rig.done()) await waitFor(() => rig!.done(), 'the kill window', 15_000).catch(() => undefined);
    const lostInWindow = unreported();
    for (const e of lostInWindow) {
      const lines = rig.logsOf(coordinator).filter((l) => l.executionId === e.id);
      console.log(
        `${e.id} claimed at the service ${Date.parse(e.claimedAt!) - killedAt} ms from the coordinator's kill ` +
          `(kill took ${killDoneAt - killedAt} ms), never reported; the coordinator's lines on it: ${JSON.stringify(lines)}`,
      );
      // Redis never took it: 'execution claimed' is logged once the claim is stored, and the coordinator never was.
      expect(lines.filter((l) => l.msg === 'execution claimed')).toEqual([]);
    }
    expect(lostInWindow.length).toBeLessThanOrEqual(1);
    const figures = rig.figures();
    const rerun = rig
      .logsOf(survivor)
      .some((l) => l.msg === 'execution reported' && l.executionId === running);
    console.log(
      `kill -9 of ${victim} mid-handler and of coordinator ${coordinator}: ${JSON.stringify(figures)}; ` +
        `takeover by ${survivor} in ${tookAt - killedAt} ms; the killed handler's execution reported by ${survivor}: ${rerun}`,
    );
    expect(figures).toMatchObject({
      claimed: 45,
      reported: 45 - lostInWindow.length,
      lost: lostInWindow.length,
      rateLimited: 0,
    });
    // At least once (README, Guarantees): a replica killed after the service took its report, before it could
    // record that in Redis, leaves the execution to be reported again by another. That window, a few
    // milliseconds before a kill, is the only place a second report may come from (one CI run in many hits it).
    const twice = rig.emulator.executions().filter((e) => e.reports.length > 1);
    for (const e of twice) {
      const at = e.reports.map((r) => Date.parse(r.at));
      console.log(
        `${e.id} reported ${at.length} times, at ${at.map((t) => t - killedAt).join(', ')} ms from the coordinator's kill ` +
          `(the first replica's kill at ${victimKilledAt - killedAt} ms)`,
      );
    }
    // As many as the killed replicas had reports leaving at their kill: at most their slots (DF_CONCURRENCY 4
    // each). Once, beside a loaded suite, two reports of the coordinator left in the same millisecond as its kill.
    expect(twice.length).toBeLessThanOrEqual(2 * 4);
    for (const e of twice) {
      const first = Date.parse(e.reports[0]!.at);
      expect([victimKilledAt, killedAt].some((k) => first <= k && k - first < 1_000)).toBe(true);
    }
    expect(rig.emulator.execution(running!)?.reports).toHaveLength(1);
    expect(rerun).toBe(true);
    expect(tookAt - killedAt).toBeLessThan(8_000);
    // One month count for the key, whoever sent: it holds every request the emulator answered.
    const answered = rig.emulator.requests().filter((r) => r.apiKeyValid && r.status !== 0).length;
    expect(await rig.monthCount()).toBeGreaterThanOrEqual(answered);
  }, 120_000);

  it('Redis restarted mid-run, then a rolling restart of every replica under load: nothing lost', async () => {
    rig = await ClusterRig.create({ redis, perSecond: PER_SECOND, perMinute: PER_MINUTE });
    await Promise.all(['a', 'b', 'c'].map((name) => rig!.start(name)));
    // A steady arrival of work (10 a second) for the whole test.
    let fed = 0;
    const feeder = setInterval(() => {
      rig!.enqueue(1, () => ({ n: fed++, ms: 50 }));
    }, 100);
    try {
      await waitFor(() => rig!.figures().reported >= 10, 'work flowing', 10_000);
      await redis.stop();
      // Redis away: no replica is ready (no new claims), and each is again once Redis is back.
      await waitForStatus(() => rig!.readyStatus('a'), 503);
      await redis.restart();
      await waitForStatus(() => rig!.readyStatus('a'), 200);
      await waitFor(() => rig!.figures().reported >= 30, 'work flowing after the restart of Redis', 15_000);
      const rollingFrom = Date.now();
      for (const name of ['a', 'b', 'c']) {
        await rig.kill(name, 'SIGTERM');
        await rig.start(name);
      }
      const rollingTo = Date.now();
      clearInterval(feeder);
      await waitFor(() => rig!.done(), 'every execution reported', 20_000);
      const claims = rig.emulator
        .executions()
        .map((e) => Date.parse(e.claimedAt!))
        .filter((at) => at >= rollingFrom && at <= rollingTo)
        .sort((x, y) => x - y);
      let longestGapMs = 0;
      for (let i = 1; i < claims.length; i++)
        longestGapMs = Math.max(longestGapMs, claims[i]! - claims[i - 1]!);
      const figures = rig.figures();
      console.log(
        `Redis restart and rolling restart: ${JSON.stringify(figures)}; ${fed} executions fed; longest pause in ` +
          `pickup during the rolling restart (${rollingTo - rollingFrom} ms): ${longestGapMs} ms`,
      );
      expect(figures).toMatchObject({ claimed: fed, reported: fed, duplicated: 0, lost: 0, rateLimited: 0 });
      // The lease is given back on a clean stop: the next holder takes it within a renewal period (1.5 s).
      expect(longestGapMs).toBeLessThan(3_000);
    } finally {
      clearInterval(feeder);
    }
  }, 60_000);
});

async function waitForStatus(status: () => Promise<number>, expected: number): Promise<void> {
  const deadline = Date.now() + 10_000;
  let last = 0;
  while (Date.now() < deadline) {
    last = await status();
    if (last === expected) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`/readyz answered ${last}, not ${expected}, for 10 s`);
}
