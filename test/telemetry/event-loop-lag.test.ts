// The stall bookkeeping behind /healthz, with times passed in: a stall over the limit is reported to every
// probe until the loop has run the recovery time without another.
import { describe, expect, it } from 'vitest';
import { EventLoopLag, EventLoopLagMonitor, tickMsFor } from '../../src/telemetry/event-loop-lag.ts';

const lagWith = () => new EventLoopLag({ limitMs: 1_000, recoveryMs: 5_000 });

describe('EventLoopLag', () => {
  it('is healthy while lags stay within the limit, reporting the longest recent one', () => {
    const lag = lagWith();
    lag.record(3, 100);
    lag.record(400, 200);
    lag.record(5, 300);
    expect(lag.health(300)).toEqual({ stalled: false, lagMs: 400, recoveryLeftMs: 0 });
    expect(lag.health(5_300)).toEqual({ stalled: false, lagMs: 0, recoveryLeftMs: 0 });
  });

  it('is stalled for every probe from a lag over the limit until the recovery time has passed', () => {
    const lag = lagWith();
    lag.record(30_000, 40_000);
    for (const at of [40_000, 40_001, 42_000, 44_999]) {
      expect(lag.health(at)).toEqual({ stalled: true, lagMs: 30_000, recoveryLeftMs: 45_000 - at });
    }
    lag.record(2, 44_999);
    expect(lag.health(45_000)).toMatchObject({ stalled: false });
  });

  it('restarts the recovery time at each stall of an episode and reports its longest', () => {
    const lag = lagWith();
    lag.record(8_000, 10_000);
    lag.record(1_500, 13_000);
    expect(lag.health(17_999)).toEqual({ stalled: true, lagMs: 8_000, recoveryLeftMs: 1 });
    expect(lag.health(18_000)).toMatchObject({ stalled: false });
    // A later episode reports its own stalls, not the earlier one's.
    lag.record(1_200, 60_000);
    expect(lag.health(60_000)).toMatchObject({ stalled: true, lagMs: 1_200 });
  });
});

describe('EventLoopLagMonitor', () => {
  it('wakes an idle daemon once a second for the default 10 s limit, and often enough for a short one', () => {
    expect(tickMsFor(10_000)).toBe(1_000);
    expect(tickMsFor(60_000)).toBe(1_000);
    expect(tickMsFor(150)).toBe(15);
    expect(tickMsFor(1)).toBe(10);
  });

  it('sees a stall of 1.1 times the limit whenever it starts between two ticks', () => {
    const monitor = new EventLoopLagMonitor({ limitMs: 200, recoveryMs: 1_000 });
    try {
      const until = performance.now() + 220 + monitor.tickMs;
      while (performance.now() < until) {
        // holds the loop, as a handler on it would
      }
      expect(monitor.health().stalled).toBe(true);
    } finally {
      monitor.stop();
    }
  });
});
