import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock/manual-clock.ts';

describe('ManualClock', () => {
  it('wakes sleepers in time order only when advanced past their instant', async () => {
    const clock = new ManualClock(0);
    const woke: string[] = [];
    void clock.sleep(200).then(() => woke.push(`b@${clock.now()}`));
    void clock.sleep(100).then(() => woke.push(`a@${clock.now()}`));
    await clock.advance(99);
    expect(woke).toEqual([]);
    await clock.advance(150);
    expect(woke).toEqual(['a@100', 'b@200']);
    expect(clock.now()).toBe(249);
  });

  it('rejects a sleep when its signal aborts', async () => {
    const clock = new ManualClock(0);
    const controller = new AbortController();
    const sleeping = clock.sleep(1000, controller.signal);
    controller.abort(new Error('shutdown'));
    await expect(sleeping).rejects.toThrow('shutdown');
    expect(clock.pending).toBe(0);
  });

  it('steps its wall clock alone: the monotonic face stays, and no sleeper wakes or waits longer', async () => {
    const clock = new ManualClock(10_000_000);
    let woke = false;
    void clock.sleep(1_000).then(() => (woke = true));
    clock.step(-3_600_000);
    expect(clock.now()).toBe(10_000_000 - 3_600_000);
    expect(clock.monotonic()).toBe(10_000_000);
    await clock.advance(999);
    expect(woke).toBe(false);
    await clock.advance(1);
    expect(woke).toBe(true);
    // Both faces moved by the same second.
    expect(clock.monotonic() - clock.now()).toBe(3_600_000);
  });
});
