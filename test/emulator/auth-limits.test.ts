import { afterEach, describe, expect, it } from 'vitest';
import type { Emulator, EmulatorOptions } from '../../src/emulator/index.ts';
import { ManualClock } from '../../src/clock/manual-clock.ts';
import { call, envelope, KEY, startEmulator } from './helpers.ts';

const LIST = '/v1/data-factory/tasks';
let emulator: Emulator;

afterEach(() => emulator.close());

async function start(options: EmulatorOptions): Promise<Emulator> {
  emulator = await startEmulator(options);
  return emulator;
}

describe('authentication', () => {
  it('answers 401 UNAUTHENTICATED without a key or with an unknown one, never echoing the key', async () => {
    await start({});
    const missing = await call(emulator, 'GET', LIST, { key: null });
    expect(missing.status).toBe(401);
    expect(missing.json).toEqual(envelope(401, 'UNAUTHENTICATED'));
    const unknown = await call(emulator, 'GET', LIST, { key: 'stolen-secret' });
    expect(unknown.status).toBe(401);
    expect(unknown.text).not.toContain('stolen-secret');
    expect(emulator.requests().map((r) => r.apiKeyValid)).toEqual([false, false]);
  });

  it('accepts the key in X-Api-Key, in the api_key query parameter and as a Bearer token', async () => {
    await start({ apiKeys: ['k1', 'k2'] });
    expect((await call(emulator, 'GET', LIST, { key: 'k1' })).status).toBe(200);
    expect((await call(emulator, 'GET', `${LIST}?api_key=k2`, { key: null })).status).toBe(200);
    const bearer = await call(emulator, 'GET', LIST, { key: null, headers: { authorization: 'Bearer k2' } });
    expect(bearer.status).toBe(200);
    expect(emulator.requests().every((r) => r.apiKeyValid && r.path === LIST)).toBe(true);
  });
});

describe('rate limits', () => {
  it('refuses the 6th request within one second with 429 RATE_LIMIT and Retry-After, then frees the slot', async () => {
    const clock = new ManualClock(Date.UTC(2026, 0, 5));
    await start({ clock });
    for (let i = 0; i < 5; i++) expect((await call(emulator, 'GET', LIST)).status).toBe(200);
    const refused = await call(emulator, 'GET', LIST);
    expect(refused.status).toBe(429);
    expect(refused.json).toEqual(envelope(429, 'RATE_LIMIT'));
    expect(refused.headers.get('retry-after')).toBe('1');
    expect(emulator.requests().at(-1)).toMatchObject({ status: 429, rateLimited: true });
    await clock.advance(999);
    expect((await call(emulator, 'GET', LIST)).status).toBe(429);
    await clock.advance(1);
    expect((await call(emulator, 'GET', LIST)).status).toBe(200);
  });

  it('refuses the 51st request within a minute, and refused requests consume no budget', async () => {
    const clock = new ManualClock(Date.UTC(2026, 0, 5));
    await start({ clock });
    for (let second = 0; second < 10; second++) {
      for (let i = 0; i < 5; i++) expect((await call(emulator, 'GET', LIST)).status).toBe(200);
      // Over the burst limit: refused, and must not count against the minute.
      expect((await call(emulator, 'GET', LIST)).status).toBe(429);
      await clock.advance(1000);
    }
    const refused = await call(emulator, 'GET', LIST);
    expect(refused.status).toBe(429);
    // The first accepted request (t=0) leaves the 60 s window at t=60 s; now is t=10 s.
    expect(refused.headers.get('retry-after')).toBe('50');
    await clock.advance(50_000);
    expect((await call(emulator, 'GET', LIST)).status).toBe(200);
  });

  it('counts each API key separately and never limits 401 answers', async () => {
    const clock = new ManualClock(Date.UTC(2026, 0, 5));
    await start({ clock, apiKeys: [KEY, 'other'], limits: { perSecond: 1 } });
    expect((await call(emulator, 'GET', LIST, { key: null })).status).toBe(401);
    expect((await call(emulator, 'GET', LIST)).status).toBe(200);
    expect((await call(emulator, 'GET', LIST)).status).toBe(429);
    expect((await call(emulator, 'GET', LIST, { key: 'other' })).status).toBe(200);
  });

  it('refuses requests over the month limit until the next UTC month begins', async () => {
    const clock = new ManualClock(Date.UTC(2026, 0, 31, 23, 59, 0));
    await start({ clock, limits: { perSecond: 0, perMinute: Infinity, perMonth: 3 } });
    for (let i = 0; i < 3; i++) expect((await call(emulator, 'GET', LIST)).status).toBe(200);
    const refused = await call(emulator, 'GET', LIST);
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('60');
    await clock.advance(59_999);
    expect((await call(emulator, 'GET', LIST)).status).toBe(429);
    await clock.advance(1);
    for (let i = 0; i < 3; i++) expect((await call(emulator, 'GET', LIST)).status).toBe(200);
    expect((await call(emulator, 'GET', LIST)).status).toBe(429);
  });
});
