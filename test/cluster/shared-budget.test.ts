// The key's budget shared through a real redis-server: several replicas' budgets together never exceed the
// windows, on Redis's clock whatever each replica's clock says; reports keep headroom over polls, a 429 seen by
// one pauses all, and the month's count survives a replica's and Redis's restart (append-only file).
import type { Redis } from 'ioredis';
import pino from 'pino';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { Budget, type RequestClass } from '../../src/budget/budget.ts';
import { systemClock, type Clock } from '../../src/clock/clock.ts';
import { flushMicrotasks, ManualClock } from '../../src/clock/manual-clock.ts';
import { monthWindow } from '../../src/budget/month.ts';
import { clusterKeys, connectRedis, RECONNECT_MAX_MS } from '../../src/clustered/redis.ts';
import { SharedBudget } from '../../src/clustered/shared-budget.ts';
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

  it('polls leave the last slot of each window to reports', async () => {
    const limits = { perSecond: 3, perMinute: 50, perMonth: 40_000 };
    const poller = await replica(limits);
    const reporter = await replica(limits);
    const polls: string[] = [];
    for (let i = 0; i < 3; i++) void poller.acquire('tasks.poll').then(() => polls.push(`poll${i}`));
    await settle(() => polls.length === 2);
    expect(polls).toEqual(['poll0', 'poll1']);
    let reported = false;
    void reporter.acquire('executions.report').then(() => (reported = true));
    await settle(() => reported);
    expect(reported).toBe(true);
    expect(polls).toHaveLength(2);
    // The third poll goes once the first two leave the second's window (on Redis's clock).
    await settle(() => polls.length === 3, 100);
    expect(polls).toHaveLength(3);
  });

  it('a 429 seen by one replica pauses every replica until its end', async () => {
    const limits = { perSecond: 5, perMinute: 50, perMonth: 40_000 };
    const a = await replica(limits);
    // b's clock is 30 s ahead: the pause is placed on Redis's clock, not on a's or b's.
    const b = await replica(limits, offsetClock(30_000));
    const pausedAt = Date.now();
    a.observe({ operation: 'tasks.poll', status: 429, retryAfterMs: 1_500 });
    await new Promise((resolve) => setTimeout(resolve, 50));
    let sentAt = 0;
    void b.acquire('executions.report').then(() => (sentAt = Date.now()));
    await settle(() => sentAt > 0, 150);
    expect(sentAt - pausedAt).toBeGreaterThanOrEqual(1_450);
  });

  it("replicas whose clocks are 30 s apart count the same second's window (Redis's clock)", async () => {
    const limits = { perSecond: 5, perMinute: 50, perMonth: 40_000 };
    // The margin absorbs the time between a slot's grant and the moment this test sees it.
    const behind = await replica(limits, offsetClock(-30_000), 200);
    const ahead = await replica(limits, offsetClock(30_000), 200);
    const sentAt: number[] = [];
    await Promise.all(
      [behind, ahead].flatMap((b) =>
        [0, 1, 2, 3, 4].map(async () => {
          await b.acquire('executions.report');
          sentAt.push(Date.now());
        }),
      ),
    );
    sentAt.sort((x, y) => x - y);
    // 10 reports at 5 a second: the last goes a second after the first, whichever clock each replica has.
    expect(sentAt.at(-1)! - sentAt[0]!).toBeGreaterThanOrEqual(1_000);
    for (const at of sentAt)
      expect(sentAt.filter((t) => t >= at && t < at + 1_000).length).toBeLessThanOrEqual(5);
    // Each measured its clock's offset from Redis's.
    expect(Math.abs(ahead.clockOffsetMs + 30_000)).toBeLessThan(1_000);
    expect(Math.abs(behind.clockOffsetMs - 30_000)).toBeLessThan(1_000);
  });

  it("counts into Redis's month even when a replica's clock is in another month", async () => {
    const limits = { perSecond: 50, perMinute: 500, perMonth: 40_000 };
    // Forty days behind: last month on this replica's clock.
    const late = await replica(limits, offsetClock(-40 * 86_400_000));
    await late.acquire('tasks.poll');
    await late.acquire('tasks.poll');
    const month = monthWindow(Date.now()).key;
    expect(await clients[0]!.hgetall(clusterKeys(apiKey).month)).toEqual({ [month]: '2' });
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

  it('replicas that lost Redis retry at jittered instants, not in lockstep, each wait bounded', async () => {
    // A Redis of this test's own: the others' server stays up.
    const own = await RedisServer.start();
    const clock = new ManualClock(Date.UTC(2026, 10, 10, 12));
    const limits = { perSecond: 50, perMinute: 500, perMonth: 40_000 };
    // When each replica's request tries Redis again: the clock's instant when it began to wait, plus the wait.
    const retries: number[][] = [[], []];
    const connections: Redis[] = [];
    const budgets = await Promise.all(
      retries.map(async (instants) => {
        const redis = connectRedis(own.url);
        clients.push(redis);
        connections.push(redis);
        await redis.connect();
        const recording: Clock = {
          now: () => clock.now(),
          monotonic: () => clock.monotonic(),
          sleep: (ms, signal) => {
            instants.push(clock.monotonic() + ms);
            return clock.sleep(ms, signal);
          },
        };
        const local = new Budget({ limits, clock, safetyMarginMs: 0 });
        await local.load();
        const budget = new SharedBudget({
          local,
          redis,
          keys: clusterKeys(apiKey),
          clock: recording,
          safetyMarginMs: 0,
          replicaId: 'replica',
          logger,
          // The daemon's default back-off (DF_RETRY_BASE_MS 1 s), its jitter from Math.random as in production.
          backoff: { baseMs: 1_000, maxMs: 300_000 },
        });
        await budget.load();
        return budget;
      }),
    );
    await own.stop();
    const startedAt = clock.monotonic();
    const sent = budgets.map(() => false);
    budgets.forEach((b, i) => void b.acquire('executions.report').then(() => (sent[i] = true)));
    // Six retries each, the clock moved to the next one each time.
    for (let round = 0; round < 6; round++) {
      await settle(() => clock.pending === 2);
      expect(clock.pending).toBe(2);
      await clock.advance(clock.nextWakeAt! - clock.monotonic());
    }
    await settle(() => retries.every((r) => r.length >= 6));
    expect(budgets.every((b) => b.redisDown)).toBe(true);
    expect(sent).toEqual([false, false]);
    const [a, b] = retries.map((r) => r.slice(0, 6));
    // Not in lockstep: the two replicas come back to Redis at different instants.
    expect(a).not.toEqual(b);
    expect(a!.filter((at) => b!.includes(at)).length).toBeLessThan(6);
    // Bounded: no wait longer than the reconnection cap, so Redis's return is noticed within it.
    for (const instants of [a!, b!]) {
      let from = startedAt;
      for (const at of instants) {
        expect(at - from).toBeLessThanOrEqual(RECONNECT_MAX_MS);
        from = at;
      }
    }
    // Once Redis is back, each request goes at its next retry, within the cap.
    await own.restart();
    // ioredis reconnects on its own (real) timer, within RECONNECT_MAX_MS; the requests sleep on the clock.
    await settle(() => connections.every((redis) => redis.status === 'ready'), 100);
    expect(clock.pending).toBe(2);
    await clock.advance(RECONNECT_MAX_MS);
    await settle(() => sent.every(Boolean));
    expect(sent).toEqual([true, true]);
    await own.dispose();
  });

  /** The system clock shifted by `offsetMs`: a replica whose clock is wrong. */
  function offsetClock(offsetMs: number): Clock {
    return {
      now: () => Date.now() + offsetMs,
      monotonic: () => systemClock.monotonic(),
      sleep: (ms, signal) => systemClock.sleep(ms, signal),
    };
  }

  /** Lets Redis answer and the budgets' promises settle, up to `rounds` times 20 ms. */
  async function settle(done: () => boolean, rounds = 50): Promise<void> {
    for (let i = 0; i < rounds && !done(); i++) {
      await flushMicrotasks();
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }
});
