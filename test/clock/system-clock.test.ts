import { afterEach, describe, expect, it, vi } from 'vitest';
import { systemClock } from '../../src/clock/clock.ts';

describe('systemClock', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('waits a delay beyond one timer (a Retry-After of years) without overflowing: no warning, no early wake', async () => {
    const warnings: string[] = [];
    const onWarning = (warning: Error) => warnings.push(warning.name);
    process.on('warning', onWarning);
    const stop = new AbortController();
    let woke = false;
    const sleeping = systemClock.sleep(1_000_000_000_000, stop.signal).then(() => (woke = true));
    // An overflowing timer fires after 1 ms: 100 ms is a hundred chances to see it.
    await new Promise((resolve) => setTimeout(resolve, 100));
    stop.abort(new Error('done waiting'));
    await expect(sleeping).rejects.toThrow('done waiting');
    process.off('warning', onWarning);
    expect(woke).toBe(false);
    expect(warnings).not.toContain('TimeoutOverflowWarning');
  });

  it('wakes once the whole of a delay longer than 2^31 - 1 ms has passed, not before', async () => {
    vi.useFakeTimers({ now: 0 });
    const longest = 2_147_483_647;
    let wokeAt: number | undefined;
    void systemClock.sleep(2 * longest + 10).then(() => (wokeAt = Date.now()));
    await vi.advanceTimersByTimeAsync(2 * longest);
    expect(wokeAt).toBeUndefined();
    await vi.advanceTimersByTimeAsync(10);
    expect(wokeAt).toBe(2 * longest + 10);
  });
});
