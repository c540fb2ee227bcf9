// The key's budget shared by every replica: a request first waits its turn in this replica's Budget (priority
// queue, month allowance, pacing, 429 pause), then takes a slot in the key's windows and month count kept in
// Redis by one Lua script, so the replicas together never send more than the key allows.
//
// Priorities across replicas: the local queue orders this replica's requests (report > control > handler >
// poll); across replicas, polls and handlers' calls may not take the last slot of the second or the minute
// window (HEADROOM), so a report or control request of another replica finds a slot within a second even
// while a busy coordinator polls at the windows' limits.
//
// Time: one clock for the whole cluster, Redis's (TIME inside the scripts). Every instant in the windows and
// the pause is Redis's, so replicas whose clocks differ by seconds still count the same second; the replica's
// clock only measures how long to wait. The month key (YYYY-MM in DF_BUDGET_TIME_ZONE) is computed here from
// Redis's time as last seen, and the script refuses a key that does not hold its own instant: the caller then
// computes it again from the instant the script returns (a month's turn never counts into the wrong month).
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { GateAnswer, RequestGate, SendPermit } from '../api/client.ts';
import type { Operation } from '../api/types.ts';
import { classOf, type Budget, type BudgetSnapshot, type RequestClass } from '../budget/budget.ts';
import { monthWindow, type MonthWindow } from '../budget/month.ts';
import { DEFAULT_BACKOFF, type BackoffOptions } from '../clock/backoff.ts';
import type { Clock } from '../clock/clock.ts';
import { reconnectDelayMs, type ClusterKeys } from './redis.ts';

/** Slots of each window that polls and handlers' calls leave to reports and control requests. */
export const HEADROOM: Record<RequestClass, number> = { report: 0, control: 0, handler: 1, poll: 1 };

/** Longest wait before looking again at a month the class has used up (the reserve may be given back). */
const MONTH_RECHECK_MS = 60_000;

/** Redis's clock in ms, for the scripts below (TIME: seconds and microseconds). */
const REDIS_NOW = `
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
`;

// KEYS: sends, month, pause. ARGV: secondSpanMs, minuteSpanMs, perSecond, perMinute, monthKey, monthStartMs,
// monthEndMs, monthAllowance, member. Returns { taken (1 | 0 | -1: the month key is not Redis's month), retryAt
// (Redis ms; -1: the month allowance is used up), month used, sends in the second window, sends in the minute
// window, Redis's now (ms) }.
const TAKE_SCRIPT = `${REDIS_NOW}
local secondSpan = tonumber(ARGV[1])
local minuteSpan = tonumber(ARGV[2])
local perSecond = tonumber(ARGV[3])
local perMinute = tonumber(ARGV[4])
if now < tonumber(ARGV[6]) or now >= tonumber(ARGV[7]) then return {-1, 0, 0, 0, 0, now} end
local allowance = tonumber(ARGV[8])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - minuteSpan)
local inMinute = redis.call('ZCARD', KEYS[1])
local inSecond = redis.call('ZCOUNT', KEYS[1], '(' .. (now - secondSpan), '+inf')
local used = tonumber(redis.call('HGET', KEYS[2], ARGV[5]) or '0')
local paused = tonumber(redis.call('GET', KEYS[3]) or '0')
if paused > now then return {0, paused, used, inSecond, inMinute, now} end
if used >= allowance then return {0, -1, used, inSecond, inMinute, now} end
local retryAt = 0
if inSecond >= perSecond then
  local oldest = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. (now - secondSpan), '+inf', 'WITHSCORES', 'LIMIT', inSecond - perSecond, 1)
  retryAt = math.max(retryAt, tonumber(oldest[2]) + secondSpan)
end
if inMinute >= perMinute then
  local oldest = redis.call('ZRANGE', KEYS[1], inMinute - perMinute, inMinute - perMinute, 'WITHSCORES')
  retryAt = math.max(retryAt, tonumber(oldest[2]) + minuteSpan)
end
if retryAt > 0 then return {0, retryAt, used, inSecond, inMinute, now} end
redis.call('ZADD', KEYS[1], now, ARGV[9])
redis.call('PEXPIRE', KEYS[1], minuteSpan + 1000)
used = redis.call('HINCRBY', KEYS[2], ARGV[5], 1)
return {1, 0, used, inSecond + 1, inMinute + 1, now}
`;

// KEYS: pause. ARGV: pause (ms from Redis's now). The longest pause wins. Returns its end (Redis ms).
const PAUSE_SCRIPT = `${REDIS_NOW}
local untilMs = now + tonumber(ARGV[1])
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
if untilMs > current then
  redis.call('SET', KEYS[1], untilMs, 'PX', tonumber(ARGV[1]) + 1000)
  return untilMs
end
return current
`;

// KEYS: sends, month, pause. ARGV: secondSpanMs, minuteSpanMs. Returns { sends in the second window, sends in
// the minute window, pause end (Redis ms), Redis's now (ms) }.
const READ_SCRIPT = `${REDIS_NOW}
local inSecond = redis.call('ZCOUNT', KEYS[1], '(' .. (now - tonumber(ARGV[1])), '+inf')
local inMinute = redis.call('ZCOUNT', KEYS[1], '(' .. (now - tonumber(ARGV[2])), '+inf')
local paused = tonumber(redis.call('GET', KEYS[3]) or '0')
return {inSecond, inMinute, paused, now}
`;

type TakeReply = [number, number, number, number, number, number];

interface BudgetCommands {
  dfBudgetTake(...args: (string | number)[]): Promise<TakeReply>;
  dfBudgetPause(...args: (string | number)[]): Promise<number>;
  dfBudgetRead(...args: (string | number)[]): Promise<[number, number, number, number]>;
}

export interface SharedBudgetOptions {
  /** This replica's budget: its queue, pacing and month allowance; its month count follows the cluster's. */
  local: Budget;
  redis: Redis;
  keys: ClusterKeys;
  /** Measures waits only: every instant the windows compare is Redis's. */
  clock: Clock;
  /**
   * Added to each window, as in Budget (DF_BUDGET_SAFETY_MARGIN_MS): it must exceed how much the delay from
   * the script's instant to the request's arrival at the service varies (reply, event loop, network).
   */
  safetyMarginMs: number;
  replicaId: string;
  logger: Logger;
  /**
   * While Redis does not answer, a request waits and tries again (none is refused) after reconnectDelayMs(): the
   * daemon's back-off (DF_RETRY_BASE_MS, full jitter, so replicas that lost Redis together do not come back in
   * lockstep), capped at RECONNECT_MAX_MS so that Redis's return is noticed within it. Default DEFAULT_BACKOFF.
   */
  backoff?: BackoffOptions;
}

/** Cluster-wide figures of the last script answer, for the budget metrics. */
interface ClusterUse {
  second: number;
  minute: number;
  /** On this replica's monotonic clock. */
  pausedUntil: number;
}

export class SharedBudget implements RequestGate {
  readonly local: Budget;
  readonly #redis: Redis & BudgetCommands;
  readonly #keys: ClusterKeys;
  readonly #clock: Clock;
  readonly #timeZone: string;
  readonly #secondSpanMs: number;
  readonly #minuteSpanMs: number;
  readonly #replicaId: string;
  readonly #logger: Logger;
  readonly #backoff: BackoffOptions;
  #seq = 0;
  #use: ClusterUse | undefined;
  #redisDown = false;
  /** Redis's clock minus this replica's, as last measured (ms); 0 before the first answer. */
  #offsetMs = 0;
  /** The month holding Redis's time as last seen. */
  #month: MonthWindow | undefined;

  constructor(options: SharedBudgetOptions) {
    this.local = options.local;
    this.#keys = options.keys;
    this.#clock = options.clock;
    this.#timeZone = options.local.timeZone;
    this.#secondSpanMs = 1_000 + options.safetyMarginMs;
    this.#minuteSpanMs = 60_000 + options.safetyMarginMs;
    // Members of the sends' set must be unique across replicas, even two given the same DF_REPLICA_ID.
    this.#replicaId = `${options.replicaId}:${randomBytes(4).toString('hex')}`;
    this.#logger = options.logger;
    this.#backoff = options.backoff ?? DEFAULT_BACKOFF;
    const redis = options.redis as Redis & Partial<BudgetCommands>;
    if (!redis.dfBudgetTake) {
      redis.defineCommand('dfBudgetTake', { numberOfKeys: 3, lua: TAKE_SCRIPT });
      redis.defineCommand('dfBudgetPause', { numberOfKeys: 1, lua: PAUSE_SCRIPT });
      redis.defineCommand('dfBudgetRead', { numberOfKeys: 3, lua: READ_SCRIPT });
    }
    this.#redis = redis as Redis & BudgetCommands;
  }

  /** Reads the key's month count from Redis into the local budget (its pacing starts from the whole usage). */
  async load(): Promise<void> {
    await this.refresh();
  }

  /** Reads the cluster-wide counts (for metrics and pacing) without taking a slot. */
  async refresh(): Promise<void> {
    const [second, minute, pausedUntil, redisNow] = await this.#redis.dfBudgetRead(
      this.#keys.sends,
      this.#keys.month,
      this.#keys.pause,
      this.#secondSpanMs,
      this.#minuteSpanMs,
    );
    this.#sawRedisAt(redisNow);
    this.#use = { second, minute, pausedUntil: pausedUntil - redisNow + this.#clock.monotonic() };
    const month = this.#monthAt(redisNow);
    const used = Number((await this.#redis.hget(this.#keys.month, month.key)) ?? 0);
    this.local.observeMonthUsed(month.key, used);
  }

  acquire(operation: Operation, signal?: AbortSignal): Promise<SendPermit | void> {
    return this.#take(classOf(operation), signal, () => this.local.acquire(operation, signal));
  }

  /** A gate whose requests all queue as `cls` (handlers' `ctx.service` calls), as Budget.gateFor. */
  gateFor(cls: RequestClass): RequestGate {
    const local = this.local.gateFor(cls);
    return {
      acquire: (operation, signal) => this.#take(cls, signal, () => local.acquire(operation, signal)),
      observe: (answer) => this.observe(answer),
    };
  }

  /** A 429 pauses this replica at once and, through Redis, every other (the longest pause wins). */
  observe(answer: GateAnswer): void {
    this.local.observe(answer);
    if (answer.status !== 429) return;
    // The pause as a length: Redis places it on its own clock.
    const pauseMs = Math.max(1, Math.ceil(this.local.pausedUntil - this.#clock.monotonic()));
    this.#redis.dfBudgetPause(this.#keys.pause, pauseMs).catch((error: unknown) => {
      this.#logger.warn({ err: error as Error }, 'could not share the 429 pause with the other replicas');
    });
  }

  /** True while the last attempt to reach Redis failed. */
  get redisDown(): boolean {
    return this.#redisDown;
  }

  /** Redis's clock minus this replica's, in ms, as last measured (the skew, plus half a round trip at most). */
  get clockOffsetMs(): number {
    return this.#offsetMs;
  }

  /** The local snapshot with the windows' and the month's use of the whole cluster, as last seen. */
  snapshot(nowMs = this.#clock.monotonic()): BudgetSnapshot {
    const local = this.local.snapshot(nowMs);
    const use = this.#use;
    if (!use) return local;
    return {
      ...local,
      second: { ...local.second, used: use.second },
      minute: { ...local.minute, used: use.minute },
      pausedUntil: Math.max(local.pausedUntil, use.pausedUntil),
      pausedForMs: Math.max(0, local.pausedUntil - nowMs, use.pausedUntil - nowMs),
    };
  }

  /**
   * This replica's budget first, then a slot in Redis. Its permit is the local budget's: the wait for Redis is
   * time the request has not left yet, so this replica's windows count it from when it leaves.
   */
  async #take(
    cls: RequestClass,
    signal: AbortSignal | undefined,
    local: () => Promise<SendPermit | void>,
  ): Promise<SendPermit | void> {
    const permit = await local();
    const limits = this.local.limits;
    const member = `${this.#replicaId}:${this.#seq++}`;
    for (let failures = 0; ;) {
      signal?.throwIfAborted();
      const month = this.#monthAt(this.#clock.now() + this.#offsetMs);
      const allowance = cls === 'report' ? limits.perMonth : limits.perMonth - this.local.reportReserve;
      let reply: TakeReply;
      try {
        reply = await this.#redis.dfBudgetTake(
          this.#keys.sends,
          this.#keys.month,
          this.#keys.pause,
          this.#secondSpanMs,
          this.#minuteSpanMs,
          Math.max(1, limits.perSecond - HEADROOM[cls]),
          Math.max(1, limits.perMinute - HEADROOM[cls]),
          month.key,
          month.startMs,
          month.endMs,
          allowance,
          member,
        );
      } catch (error) {
        if (!this.#redisDown) {
          this.#logger.error(
            { err: error as Error },
            'Redis does not answer: requests wait for it (no claim, no report is sent meanwhile)',
          );
        }
        this.#redisDown = true;
        await this.#clock.sleep(reconnectDelayMs(++failures, this.#backoff), signal);
        continue;
      }
      failures = 0;
      if (this.#redisDown) this.#logger.info('Redis answers again');
      this.#redisDown = false;
      const [taken, retryAt, used, second, minute, redisNow] = reply;
      this.#sawRedisAt(redisNow);
      // Redis's time is in another month than the key sent (a month's turn, or the first answer): again.
      if (taken === -1) continue;
      this.#use = { second, minute, pausedUntil: this.#use?.pausedUntil ?? 0 };
      this.local.observeMonthUsed(month.key, used);
      if (taken === 1) return permit;
      const waitMs = retryAt < 0 ? Math.min(MONTH_RECHECK_MS, month.endMs - redisNow) : retryAt - redisNow;
      await this.#clock.sleep(Math.max(1, waitMs), signal);
    }
  }

  /** Records Redis's time `redisNow` just answered: the offset to this replica's wall clock names the month. */
  #sawRedisAt(redisNow: number): void {
    this.#offsetMs = redisNow - this.#clock.now();
  }

  /** The month (in DF_BUDGET_TIME_ZONE) holding the instant `redisMs` of Redis's clock. */
  #monthAt(redisMs: number): MonthWindow {
    const month = this.#month;
    if (month && redisMs >= month.startMs && redisMs < month.endMs) return month;
    this.#month = monthWindow(redisMs, this.#timeZone);
    return this.#month;
  }
}
