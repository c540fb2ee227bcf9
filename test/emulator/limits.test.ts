import { describe, expect, it } from 'vitest';
import { RateLimiter } from '../../src/emulator/limits.ts';

const JAN_5 = Date.UTC(2026, 0, 5);

describe('RateLimiter', () => {
  it('treats 0 and Infinity as no limit', () => {
    const limiter = new RateLimiter({ perSecond: 0, perMinute: Infinity, perMonth: 0 });
    for (let i = 0; i < 100; i++) expect(limiter.take('k', JAN_5)).toEqual({ allowed: true });
  });

  it('answers the longest wait when several windows are full', () => {
    const limiter = new RateLimiter({ perSecond: 2, perMinute: 2, perMonth: 0 });
    expect(limiter.take('k', JAN_5).allowed).toBe(true);
    expect(limiter.take('k', JAN_5 + 500).allowed).toBe(true);
    expect(limiter.take('k', JAN_5 + 600)).toEqual({ allowed: false, retryAfterSeconds: 60 });
  });

  it('rounds a partial second of wait up to a whole second', () => {
    const limiter = new RateLimiter({ perSecond: 1, perMinute: 0, perMonth: 0 });
    limiter.take('k', JAN_5);
    expect(limiter.take('k', JAN_5 + 999)).toEqual({ allowed: false, retryAfterSeconds: 1 });
    expect(limiter.take('k', JAN_5 + 1000)).toEqual({ allowed: true });
  });

  it('forgets all consumption on reset', () => {
    const limiter = new RateLimiter({ perSecond: 1 });
    limiter.take('k', JAN_5);
    limiter.reset();
    expect(limiter.take('k', JAN_5)).toEqual({ allowed: true });
  });
});
