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
});
