// Redis Sentinel as operators run it: two replicas (real processes) find the master through three real
// redis-sentinels; the master is killed mid-run, the sentinels promote its replica, and the cluster carries on:
// nothing lost, no 429, a coordinator polling again within 10 s of the promotion.
import { afterAll, describe, expect, it } from 'vitest';
import { waitFor } from '../daemon/harness.ts';
import { ClusterRig } from './cluster-rig.ts';
import { MASTER_NAME, SentinelSet, sentinelTestsRun } from './redis-sentinel.ts';

const PER_SECOND = 20;
const PER_MINUTE = 1_200;

describe.runIf(sentinelTestsRun)('Redis Sentinel failover (real redis-sentinel, master killed)', () => {
  let sentinels: SentinelSet | undefined;
  let rig: ClusterRig | undefined;

  afterAll(async () => {
    await rig?.dispose();
    await sentinels?.dispose();
  });

  it('the master is killed: lost 0, 0 × 429, a coordinator polls again within 10 s of the promotion', async () => {
    sentinels = await SentinelSet.start({ count: 3, downAfterMs: 1_000 });
    rig = await ClusterRig.create({ redis: sentinels.master, perSecond: PER_SECOND, perMinute: PER_MINUTE });
    const env = {
      // With sentinels the URL's host is not used: the sentinels name the master.
      DF_REDIS_URL: `redis://${MASTER_NAME}/0`,
      DF_REDIS_SENTINELS: sentinels.addresses,
      DF_REDIS_SENTINEL_MASTER: MASTER_NAME,
    };
    await Promise.all(['a', 'b'].map((name) => rig!.start(name, env)));
    rig.enqueue(40, (n) => ({ n, ms: 100 }));
    await waitFor(() => rig!.figures().reported >= 10, 'a quarter reported', 20_000);
    const switched = sentinels.nextSwitch();
    await new Promise((resolve) => setTimeout(resolve, 100));
    const killedAt = Date.now();
    await sentinels.master.stop({ kill: true });
    const promotion = await switched;
    expect(promotion.port).toBe(sentinels.replica.port);
    // Work given out after the promotion: only a coordinator polling on the new master claims it.
    rig.enqueue(20, (n) => ({ n: 100 + n, ms: 100 }));
    const claimedLater = () =>
      rig!.emulator.executions().filter((e) => (e.input.n as number) >= 100 && e.claimedAt !== undefined);
    await waitFor(
      () => claimedLater().length > 0,
      'an execution given out after the promotion to be claimed',
      20_000,
    );
    const firstClaim = Math.min(...claimedLater().map((e) => Date.parse(e.claimedAt!)));
    await waitFor(() => rig!.done(), 'every execution reported', 30_000);
    const figures = rig.figures();
    console.log(
      `sentinel failover: promoted ${promotion.at - killedAt} ms after the kill; first claim ${firstClaim - promotion.at} ms after the promotion; ${JSON.stringify(figures)}`,
    );
    expect(figures).toMatchObject({ claimed: 60, reported: 60, lost: 0, rateLimited: 0 });
    expect(figures.maxPerSecond).toBeLessThanOrEqual(PER_SECOND);
    expect(firstClaim - promotion.at).toBeLessThan(10_000);
    for (const name of ['a', 'b']) {
      const deadline = Date.now() + 10_000;
      while ((await rig.readyStatus(name)) !== 200 && Date.now() < deadline)
        await new Promise((resolve) => setTimeout(resolve, 100));
      expect(await rig.readyStatus(name)).toBe(200);
    }
  }, 90_000);
});
