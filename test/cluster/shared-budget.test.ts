// The key's budget shared through a real redis-server: several replicas' budgets together never exceed the
// windows, reports keep headroom over polls, a 429 seen by one pauses all, and the month's count survives a
// replica's and Redis's restart (append-only file).
import type { Redis } from 'ioredis';
import pino from 'pino';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { Budget, type RequestClass } from '../../src/budget/budget.ts';
import { systemClock, type Clock } from '../../src/clock/clock.ts';
import { ManualClock, flushMicrotasks } from '../../src/clock/manual-clock.ts';
import { clusterKeys, connectRedis } from '../../src/cluster/redis.ts';
import { SharedBudget } from '../../src/cluster/shared-budget.ts';
import { clusteredTestsRun, RedisServer } from './redis-server.ts';

const logger = pino({ level: 'silent' });

describe.runIf(clusteredTestsRun)('SharedBudget on a real Redis', () => {
  let server: RedisServer;
  const clients: Redis[] = [];
  let apiKey = '';
  let n = 0;

  beforeAll(async () => {
    server = await RedisServer.start();
  });
  afterAll(async () => {
    for (const c of clients) c.disconnect();
    await server?.dispose();
  });
  beforeEach(() => {
    apiKey = `key-${++n}`;
  });

  async function replica(
    limits: { perSecond: number; perMinute: number; perMonth: number },
    clock: Clock = systemClock,
    safetyMarginMs = 0,
  ): Promise<SharedBudget> {
    const redis = connectRedis(server.url);
    await redis.connect();
    clients.push(redis);
    const local = new Budget({ limits, clock, safetyMarginMs });
    await local.load();
    const budget = new SharedBudget({
      local,
      redis,
      keys: clusterKeys(apiKey),
      clock,
      safetyMarginMs,
      replicaId: 'replica',
      logger,
    });
    await budget.load();
    return budget;
  }

  it('four replicas sending at once never put more than the limits in any window', async () => {
    // 21: polls and handlers leave the minute's last slot to reports, and the 20 below are theirs too.
    const limits = { perSecond: 5, perMinute: 21, perMonth: 40_000 };
    // The margin absorbs the time between a slot's grant and the moment this test sees it, as it does for the
    // service's clock.
    const replicas = await Promise.all([1, 2, 3, 4].map(() => replica(limits, systemClock, 200)));
    const sentAt: number[] = [];
    const classes: RequestClass[] = ['report', 'control', 'handler', 'poll'];
    const started = Date.now();
    // 5 each: 20 in all, the minute's limit; the second's limit spreads them over at least 3 s.
    await Promise.all(
      replicas.flatMap((b, i) =>
        [0, 1, 2, 3, 4].map(async () => {
          await b.gateFor(classes[i]!).acquire('tasks.poll');
          sentAt.push(Date.now());
        }),
      ),
    );
    expect(sentAt).toHaveLength(20);
    sentAt.sort((a, b) => a - b);
    for (const at of sentAt)
      expect(sentAt.filter((t) => t >= at && t < at + 1_000).length).toBeLessThanOrEqual(5);
    expect(Date.now() - started).toBeGreaterThanOrEqual(3_000);
    // The minute is full for polls: a fifth replica's poll waits for the minute to end. Its clock is a manual
    // one set to now, so the wait shows as it begins (a sleep until the window's end), not slept through.
    const lateClock = new ManualClock(Date.now());
    const late = await replica(limits, lateClock, 200);
    const abort = new AbortController();
    const waiting = late.acquire('tasks.poll', abort.signal).then(
      () => 'sent',
      () => 'waited',
    );
    await settle(() => lateClock.pending > 0, 500);
    // Until the minute of the first send ends, not the second of the last one.
    expect(lateClock.nextWakeAt! - lateClock.now()).toBeGreaterThan(40_000);
    abort.abort(new Error('test over'));
    expect(await waiting).toBe('waited');
    // What Redis counted: the 20 sent (the local count also holds the poll that waited, until it is sent).
    const monthKey = late.local.month().key;
    expect(Number(await clients[0]!.hget(clusterKeys(apiKey).month, monthKey))).toBe(20);
  });

  it('polls leave the last slot of each window to reports (manual clock)', async () => {
    const clock = new ManualClock(Date.UTC(2026, 10, 24, 12));
    const limits = { perSecond: 3, perMinute: 50, perMonth: 40_000 };
    const poller = await replica(limits, clock);
    const reporter = await replica(limits, clock);
    const polls: string[] = [];
    for (let i = 0; i < 3; i++) void poller.acquire('tasks.poll').then(() => polls.push(`poll${i}`));
    await settle(() => polls.length === 2);
    expect(polls).toEqual(['poll0', 'poll1']);
    let reported = false;
    void reporter.acquire('executions.report').then(() => (reported = true));
    await settle(() => reported);
    expect(reported).toBe(true);
    expect(polls).toHaveLength(2);
    await clock.advance(1_000);
    await settle(() => polls.length === 3);
    expect(polls).toHaveLength(3);
  });

  it('a 429 seen by one replica pauses every replica until its end', async () => {
    const clock = new ManualClock(Date.UTC(2026, 10, 24, 12));
    const limits = { perSecond: 5, perMinute: 50, perMonth: 40_000 };
    const a = await replica(limits, clock);
    const b = await replica(limits, clock);
    a.observe({ operation: 'tasks.poll', status: 429, retryAfterMs: 10_000 });
    await new Promise((resolve) => setTimeout(resolve, 50));
    let sent = false;
    void b.acquire('executions.report').then(() => (sent = true));
    await settle(() => false, 5);
    await clock.advance(9_000);
    await settle(() => sent, 5);
    expect(sent).toBe(false);
    await clock.advance(1_100);
    await settle(() => sent);
    expect(sent).toBe(true);
  });

  it("the month's count survives a replica's restart and Redis's restart (append-only file)", async () => {
    const limits = { perSecond: 50, perMinute: 500, perMonth: 40_000 };
    const first = await replica(limits);
    for (let i = 0; i < 7; i++) await first.acquire('tasks.poll');
    expect(first.local.month().used).toBe(7);
    const restarted = await replica(limits);
    expect(restarted.local.month().used).toBe(7);
    await server.stop();
    await server.restart();
    const afterRedis = await replica(limits);
    expect(afterRedis.local.month().used).toBe(7);
    await afterRedis.acquire('executions.report');
    expect(afterRedis.local.month().used).toBe(8);
  });

  it('while Redis is away a request waits (it is neither sent nor refused), and goes once Redis is back', async () => {
    const limits = { perSecond: 50, perMinute: 500, perMonth: 40_000 };
    const budget = await replica(limits);
    await server.stop();
    let sent = false;
    void budget.acquire('executions.report').then(() => (sent = true));
    await new Promise((resolve) => setTimeout(resolve, 1_200));
    expect(sent).toBe(false);
    expect(budget.redisDown).toBe(true);
    await server.restart();
    await settle(() => sent, 150);
    expect(sent).toBe(true);
    expect(budget.redisDown).toBe(false);
  });

  /** Lets Redis answer and the budgets' promises settle, up to `rounds` times 20 ms. */
  async function settle(done: () => boolean, rounds = 50): Promise<void> {
    for (let i = 0; i < rounds && !done(); i++) {
      await flushMicrotasks();
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }
});
