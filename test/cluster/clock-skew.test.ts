// Two real replicas whose clocks differ (Debian's libfaketime shifts one process's clock) share the key's
// windows on Redis's clock: the emulator, counting on its own clock, sees no 429 and never more than the
// per-second limit.
import { existsSync } from 'node:fs';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../daemon/harness.ts';
import { ClusterRig } from './cluster-rig.ts';
import { clusteredTestsRun, RedisServer } from './redis-server.ts';

const FAKETIME_LIB = ['x86_64-linux-gnu', 'aarch64-linux-gnu']
  .map((arch) => `/usr/lib/${arch}/faketime/libfaketime.so.1`)
  .find((lib) => existsSync(lib));

/** Under CI=true they always run (failing without libfaketime: .ci/run installs it), elsewhere if installed. */
const skewTestsRun = clusteredTestsRun && (FAKETIME_LIB !== undefined || process.env.CI === 'true');
if (!skewTestsRun)
  console.warn('skipping the clock-skew tests: they need libfaketime (Debian: apt-get install faketime)');

const PER_SECOND = 5;
/** Raised from the service's 50 so that the run takes seconds: the second's window is what skew breaks. */
const PER_MINUTE = 600;
/**
 * Their polls and reports keep the per-second window full for some 10 s, time enough for each replica's
 * skewed view of it to show as a sixth request or a 429; 40 took twice as long for the same point.
 */
const EXECUTIONS = 24;

/** Settings that run a replica with its clock `offsetSeconds` off (realtime only: its timers keep time). */
function clockOffBy(offsetSeconds: number): Record<string, string> {
  return {
    LD_PRELOAD: FAKETIME_LIB ?? 'libfaketime is missing: apt-get install faketime (.ci/run installs it)',
    FAKETIME: `${offsetSeconds >= 0 ? '+' : ''}${offsetSeconds}s`,
    DONT_FAKE_MONOTONIC: '1',
  };
}

describe.runIf(skewTestsRun)('replicas whose clocks differ', () => {
  let redis: RedisServer;
  let rig: ClusterRig | undefined;

  beforeAll(async () => {
    // Without it the replicas' clocks would not differ, and the tests would pass without testing anything.
    expect(FAKETIME_LIB, 'libfaketime is missing: apt-get install faketime').toBeDefined();
    redis = await RedisServer.start();
  });
  afterEach(async () => {
    await rig?.dispose();
    rig = undefined;
  });
  afterAll(async () => {
    await redis?.dispose();
  });

  for (const offsetSeconds of [2, 30]) {
    it(`two replicas ${offsetSeconds} s apart: 0 × 429, at most ${PER_SECOND} requests in any second at the service`, async () => {
      rig = await ClusterRig.create({ redis, perSecond: PER_SECOND, perMinute: PER_MINUTE });
      const before = Date.now();
      // The replica whose clock is off starts first, and so coordinates: its polls and the other's reports
      // meet in the same windows.
      const ahead = await rig.start('b', clockOffBy(offsetSeconds));
      await rig.start('a');
      // The shift took: b's log lines carry its own clock.
      const firstLine = Date.parse(ahead.logs()[0]!.time as string);
      expect(firstLine - before).toBeGreaterThan(offsetSeconds * 1_000 - 500);
      const started = Date.now();
      rig.enqueue(EXECUTIONS);
      // Not done in time (a 429 pauses the cluster 60 s): the figures below say why.
      await waitFor(() => rig!.done(), 'every execution reported', 60_000).catch(() => undefined);
      const figures = rig.figures();
      const byReplica = Object.fromEntries(rig.reportsByReplica());
      console.log(
        `clocks ${offsetSeconds} s apart, ${EXECUTIONS} executions: ${JSON.stringify(figures)} in ` +
          `${Date.now() - started} ms; reports by replica ${JSON.stringify(byReplica)}`,
      );
      expect(figures.rateLimited).toBe(0);
      expect(figures.maxPerSecond).toBeLessThanOrEqual(PER_SECOND);
      expect(figures).toMatchObject({ claimed: EXECUTIONS, reported: EXECUTIONS, lost: 0 });
      // Both replicas sent reports: the windows were shared, not used by one alone.
      expect(byReplica.a).toBeGreaterThan(0);
      expect(byReplica.b).toBeGreaterThan(0);
    }, 90_000);
  }
});
