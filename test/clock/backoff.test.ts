import { describe, expect, it } from 'vitest';
import { backoffCeilingMs, backoffDelayMs, DEFAULT_BACKOFF } from '../../src/clock/backoff.ts';

describe('backoff', () => {
  it('doubles the ceiling from baseMs on each retry up to maxMs', () => {
    const ceilings = [1, 2, 3, 4, 5, 6, 7, 8].map((retry) => backoffCeilingMs(retry, DEFAULT_BACKOFF));
    expect(ceilings).toEqual([1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000, 30_000]);
  });

  it('draws every delay within [0, ceiling] (full jitter)', () => {
    let seed = 1;
    // A small deterministic generator keeps the test repeatable while covering the whole [0, 1) range.
    const random = () => ((seed = (seed * 48_271) % 2_147_483_647) - 1) / 2_147_483_646;
    for (let retry = 1; retry <= 12; retry++) {
      for (let draw = 0; draw < 200; draw++) {
        const delay = backoffDelayMs(retry, { baseMs: 1_000, maxMs: 30_000, random });
        expect(delay).toBeGreaterThanOrEqual(0);
        expect(delay).toBeLessThanOrEqual(Math.min(30_000, 1_000 * 2 ** (retry - 1)));
        expect(Number.isInteger(delay)).toBe(true);
      }
    }
  });

  it('grows with the retry number for the same random draw', () => {
    const options = { baseMs: 1_000, maxMs: 30_000, random: () => 0.75 };
    const delays = [1, 2, 3, 4, 5, 6].map((retry) => backoffDelayMs(retry, options));
    expect(delays).toEqual([750, 1_500, 3_000, 6_000, 12_000, 22_500]);
  });

  it('never exceeds the cap, even with a random source that returns 1', () => {
    expect(backoffDelayMs(20, { baseMs: 1_000, maxMs: 30_000, random: () => 1 })).toBe(30_000);
  });

  it('is zero when base and cap are zero (no waiting, for tests)', () => {
    expect(backoffDelayMs(3, { baseMs: 0, maxMs: 0 })).toBe(0);
  });
});
