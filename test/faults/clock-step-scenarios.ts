// Issue 36's clock rows against the real `df-worker start` (standalone and clustered) whose wall clock
// libfaketime moves while it runs (FAKETIME_TIMESTAMP_FILE rewritten, its monotonic clock left alone, as NTP
// would leave it), the emulator on loopback keeping the real time. `full` runs the figures (the
// service's 5/s and 50/min, 400 executions, minutes); the tests run the same code shrunk to seconds.
import { existsSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ClusterRig } from '../cluster/cluster-rig.ts';
import type { RedisServer } from '../cluster/redis-server.ts';
import {
  budgetFigures,
  faultWindow,
  figuresOf,
  withRig,
  type BudgetFigures,
  type FaultRig,
  type ScenarioFigures,
  type Tally,
} from './rig.ts';

export const FAKETIME_LIB = ['x86_64-linux-gnu', 'aarch64-linux-gnu']
  .map((arch) => `/usr/lib/${arch}/faketime/libfaketime.so.1`)
  .find((lib) => existsSync(lib));

const HOUR_BACK = '-1h';
const WAKE_TOKEN = 'clock-step-wake-token-0f3a';

export interface ClockStepResult {
  /** The row's bounds held: lost 0, 0 × 429, within 5/s and the minute's limit, resumed within 1 s. */
  completed: boolean;
  figures: ScenarioFigures;
  tally: Tally;
  budget: BudgetFigures;
  detail: string;
}

/** How big a run is: the issue's own figures, or shrunk for a test. */
export interface ClockStepSize {
  perMinute: number;
  executions: number;
  /** How long requests are watched after the step (or after the pause, or from the start). */
  watchMs: number;
  /** The 429's Retry-After, in seconds (the pause row). */
  pauseSeconds: number;
  /** DF_MAX_POLL_INTERVAL_MS: how often an idle task is polled at least. */
  maxPollIntervalMs: number;
  /**
   * The month's budget and idle pace at their defaults (40,000, an idle poll about every 65 s), as the issue
   * ran them, instead of a month large enough that idle polls come every `maxPollIntervalMs`.
   */
  defaultPace?: boolean;
}

export const FULL_SIZE: ClockStepSize = {
  perMinute: 50,
  executions: 400,
  watchMs: 120_000,
  pauseSeconds: 60,
  maxPollIntervalMs: 30_000,
};
/** The figures with the default month and idle pace (the rows whose daemon has work from the start). */
export const FULL_SIZE_DEFAULT_PACE: ClockStepSize = { ...FULL_SIZE, defaultPace: true };
/**
 * Shrunk to seconds for the tests: a 2 s pause still has the step half a second into it and a second and a
 * half of silence to check after it; 3 s watched after the pause (>= 9 requests of 15 at the per-second
 * limit) say as well as 6 s did that nothing stalls or bursts, at half the wait.
 */
export const TEST_SIZE: ClockStepSize = {
  perMinute: 300,
  executions: 60,
  watchMs: 3_000,
  pauseSeconds: 2,
  maxPollIntervalMs: 2_000,
};
export const TEST_SIZE_DEFAULT_PACE: ClockStepSize = { ...TEST_SIZE, defaultPace: true };
const PER_SECOND = 5;

/** A process's wall clock under libfaketime, moved by rewriting its timestamp file. */
export class FakeWallClock {
  readonly file: string;

  constructor(dir: string) {
    this.file = join(dir, 'faketime');
  }

  /** Settings that run a process on this clock, `offset` (libfaketime's `+2s`, `-10m`) off at start. */
  async env(offset = '+0'): Promise<Record<string, string>> {
    await this.set(offset);
    return {
      LD_PRELOAD: FAKETIME_LIB ?? 'libfaketime is missing: apt-get install faketime (.ci/run installs it)',
      FAKETIME_TIMESTAMP_FILE: this.file,
      // Read at every call, so that a step takes at once (the default caches it for 10 s).
      FAKETIME_NO_CACHE: '1',
      DONT_FAKE_MONOTONIC: '1',
      FAKETIME_DONT_FAKE_MONOTONIC: '1',
    };
  }

  /** Moves the wall clock to `offset` from the real time. */
  set(offset: string): Promise<void> {
    return writeFile(this.file, `${offset}\n`);
  }
}

function daemonLimits(size: ClockStepSize): Record<string, string> {
  const limits = {
    DF_BUDGET_PER_SECOND: String(PER_SECOND),
    DF_BUDGET_PER_MINUTE: String(size.perMinute),
    DF_BUDGET_SAFETY_MARGIN_MS: '200',
    DF_RETRY_AFTER_MAX_MS: '120000',
  };
  if (size.defaultPace === true) return limits;
  return {
    ...limits,
    // A month far larger than the run's, so that the idle pace is the max interval below, not a minute.
    DF_BUDGET_PER_MONTH: '5000000',
    DF_MAX_POLL_INTERVAL_MS: String(size.maxPollIntervalMs),
  };
}

/** Arrival instants (the service's clock) of the requests in [fromMs, toMs). */
function arrivals(rig: { emulator: FaultRig['emulator'] }, fromMs: number, toMs = Infinity): number[] {
  return rig.emulator
    .requests()
    .map((r) => r.at)
    .filter((at) => at >= fromMs && at < toMs)
    .sort((a, b) => a - b);
}

/**
 * Milliseconds from `fromMs` to the first request stamped at or after it, counted from the earliest instant it
 * may have come (a stall of the emulator's process stamps it late); Infinity when none came.
 */
function firstAfter(rig: { emulator: FaultRig['emulator'] }, fromMs: number): number {
  const first = rig.emulator
    .requests()
    .filter((r) => r.at >= fromMs)
    .sort((a, b) => a.at - b.at)[0];
  return first === undefined ? Infinity : Math.max(0, Math.round(first.earliestAt - fromMs));
}

function longestSilence(instants: number[], fromMs: number, toMs: number): number {
  const points = [fromMs, ...instants, toMs];
  let longest = 0;
  for (let i = 1; i < points.length; i++) longest = Math.max(longest, points[i]! - points[i - 1]!);
  return longest;
}

function withinLimits(budget: BudgetFigures, perMinute: number, rateLimitedAllowed = 0): boolean {
  return (
    budget.rateLimited <= rateLimitedAllowed &&
    budget.maxPerSecond <= PER_SECOND &&
    budget.maxPerMinute <= perMinute
  );
}

/** Ends the daemon with SIGTERM (its drain reports what it claimed) and returns the service's tally. */
async function finish(rig: FaultRig, daemon: ReturnType<FaultRig['start']>): Promise<Tally> {
  if (daemon.running) await daemon.terminate();
  return rig.tally();
}

/** Requests the step must not slow: `watchMs` at the minute's limit, less the burst spent before it. */
function expectedRequests(size: ClockStepSize): number {
  const atLimit = Math.min(PER_SECOND, size.perMinute / 60) * (size.watchMs / 1_000);
  return Math.floor(0.6 * atLimit);
}

/** Row 36.1: the wall clock steps back 1 h while executions wait. */
export async function stepBackWhileBusy(size: ClockStepSize): Promise<ClockStepResult> {
  return withRig({ limits: { perSecond: PER_SECOND, perMinute: size.perMinute } }, async (rig) => {
    const wall = new FakeWallClock(rig.dir);
    const daemon = rig.start({ ...daemonLimits(size), ...(await wall.env()) });
    await rig.started(daemon);
    rig.enqueue(size.executions);
    // While requests flow (the minute's window is not yet full), the wall clock steps back an hour.
    await rig.waitFor(() => rig.emulator.requests().length >= 10, 'ten requests');
    const stepAt = Date.now();
    await wall.set(HOUR_BACK);
    await faultWindow(size.watchMs);
    const after = arrivals(rig, stepAt, stepAt + size.watchMs);
    const tally = await finish(rig, daemon);
    const budget = budgetFigures(rig);
    const resumedMs = firstAfter(rig, stepAt);
    const completed =
      resumedMs <= 1_000 &&
      after.length >= expectedRequests(size) &&
      tally.lost === 0 &&
      withinLimits(budget, size.perMinute);
    return {
      completed,
      figures: figuresOf(tally),
      tally,
      budget,
      detail:
        `${after.length} requests in the ${size.watchMs / 1000} s after the step (>= ${expectedRequests(size)} ` +
        `expected), the first ${resumedMs} ms after it`,
    };
  });
}

/** Row 36.2: the same step on an idle daemon; an execution enqueued after it must be claimed. */
export async function stepBackWhileIdle(size: ClockStepSize): Promise<ClockStepResult> {
  return withRig({ limits: { perSecond: PER_SECOND, perMinute: size.perMinute } }, async (rig) => {
    const wall = new FakeWallClock(rig.dir);
    const daemon = rig.start({ ...daemonLimits(size), ...(await wall.env()) });
    await rig.started(daemon);
    await rig.waitFor(
      () => rig.emulator.requests().length >= 2,
      'two idle polls',
      3 * size.maxPollIntervalMs,
    );
    const stepAt = Date.now();
    await wall.set(HOUR_BACK);
    await faultWindow(Math.min(5_000, size.watchMs / 4));
    const [id] = rig.enqueue(1);
    const enqueuedAt = Date.now();
    const boundMs = size.maxPollIntervalMs + 1_000;
    await rig.waitUntil(() => rig.execution(id!)?.claimedAt !== undefined, size.watchMs);
    const claimedAt = rig.execution(id!)?.claimedAt;
    const pickupMs = claimedAt === undefined ? Infinity : Date.parse(claimedAt) - enqueuedAt;
    const watchedTo = Date.now();
    const silenceMs = longestSilence(arrivals(rig, stepAt, watchedTo), stepAt, watchedTo);
    await rig.waitUntil(() => rig.reportsOf(id!).length > 0, 5_000);
    const tally = await finish(rig, daemon);
    const budget = budgetFigures(rig);
    const completed =
      pickupMs <= boundMs && silenceMs <= boundMs && tally.lost === 0 && withinLimits(budget, size.perMinute);
    return {
      completed,
      figures: figuresOf(tally),
      tally,
      budget,
      detail:
        `execution enqueued after the step claimed after ${pickupMs} ms (bound ${boundMs}); longest silence ` +
        `after the step ${silenceMs} ms`,
    };
  });
}

/** Row 36.3: the same step during a 429's pause; `/wake` during it; requests and reports go on after it. */
export async function stepBackDuringPause(size: ClockStepSize): Promise<ClockStepResult> {
  return withRig({ limits: { perSecond: PER_SECOND, perMinute: size.perMinute } }, async (rig) => {
    const wall = new FakeWallClock(rig.dir);
    const daemon = rig.start({
      ...daemonLimits(size),
      DF_HTTP_WAKE: 'token',
      DF_HTTP_WAKE_TOKEN: WAKE_TOKEN,
      ...(await wall.env()),
    });
    await rig.started(daemon);
    rig.enqueue(size.executions);
    await rig.waitFor(() => rig.emulator.requests().length >= 4, 'four requests');
    rig.emulator.setFaults([
      { operation: 'tasks.poll', kind: 'rateLimit', retryAfterSeconds: size.pauseSeconds, count: 1 },
    ]);
    await rig.waitFor(() => rig.emulator.requests().some((r) => r.status === 429), 'the 429');
    const pausedAt = rig.emulator.requests().find((r) => r.status === 429)!.at;
    const pauseEndsAt = pausedAt + size.pauseSeconds * 1_000;
    await faultWindow((size.pauseSeconds * 1_000) / 4);
    await wall.set(HOUR_BACK);
    const wake = await fetch(`${daemon.healthUrl()}/wake`, {
      method: 'POST',
      headers: { authorization: `Bearer ${WAKE_TOKEN}` },
    }).catch(() => undefined);
    await faultWindow(Math.max(0, pauseEndsAt - Date.now()) + size.watchMs);
    const during = arrivals(rig, pausedAt + 1, pauseEndsAt);
    const after = arrivals(rig, pauseEndsAt, pauseEndsAt + size.watchMs);
    const reportsAfter = rig.emulator
      .requests()
      .filter((r) => r.at >= pauseEndsAt && r.operation === 'executions.report').length;
    const tally = await finish(rig, daemon);
    const budget = budgetFigures(rig);
    const resumedMs = firstAfter(rig, pauseEndsAt);
    const completed =
      during.length === 0 &&
      resumedMs <= 1_000 &&
      after.length >= expectedRequests(size) &&
      reportsAfter > 0 &&
      tally.lost === 0 &&
      withinLimits(budget, size.perMinute, 1);
    return {
      completed,
      figures: figuresOf(tally),
      tally,
      budget: { ...budget, rateLimited: budget.rateLimited - 1 },
      detail:
        `/wake answered ${wake?.status ?? 'nothing'}; ${during.length} requests during the ` +
        `${size.pauseSeconds} s pause, ${after.length} in the ${size.watchMs / 1000} s after it (reports ` +
        `${reportsAfter}), the first ${resumedMs} ms after its end (429s beyond the injected one counted)`,
    };
  });
}

/** Row 36.4: the daemon's clock 10 min behind the service's from the start. */
export async function clockBehindFromStart(
  size: ClockStepSize,
  /** libfaketime's offset of the daemon's wall clock; `+0` is the same run with the clocks agreeing. */
  offset = '-10m',
): Promise<ClockStepResult> {
  return withRig({ limits: { perSecond: PER_SECOND, perMinute: size.perMinute } }, async (rig) => {
    const wall = new FakeWallClock(rig.dir);
    rig.enqueue(size.executions);
    const daemon = rig.start({ ...daemonLimits(size), ...(await wall.env(offset)) });
    await rig.started(daemon);
    const startedAt = Date.now();
    await faultWindow(size.watchMs);
    const sent = arrivals(rig, startedAt, startedAt + size.watchMs);
    const claimed = rig.tally().claimed;
    const tally = await finish(rig, daemon);
    const budget = budgetFigures(rig);
    const silenceMs = longestSilence(sent, startedAt, startedAt + size.watchMs);
    // A poll and a report per execution.
    const expected = Math.min(size.executions, Math.floor(expectedRequests(size) / 2));
    const completed =
      claimed >= expected && silenceMs <= 61_000 && tally.lost === 0 && withinLimits(budget, size.perMinute);
    return {
      completed,
      figures: figuresOf(tally),
      tally,
      budget,
      detail:
        `${claimed} of ${size.executions} claimed in ${size.watchMs / 1000} s (>= ${expected} expected); ` +
        `longest silence ${silenceMs} ms`,
    };
  });
}

/**
 * Clustered: the same step during a 429's pause, on replica `a` (the coordinator) under libfaketime, with work
 * waiting: polls and both replicas' reports resume within a second of the pause's end.
 */
export async function stepBackClustered(redis: RedisServer, size: ClockStepSize): Promise<ClockStepResult> {
  const rig = await ClusterRig.create({ redis, perSecond: PER_SECOND, perMinute: size.perMinute });
  try {
    const wall = new FakeWallClock(rig.dir);
    const idleEnv = {
      DF_MAX_POLL_INTERVAL_MS: String(size.maxPollIntervalMs),
      DF_RETRY_AFTER_MAX_MS: '120000',
    };
    // The replica whose clock steps starts first, and so coordinates: its polls, and both replicas' reports.
    await rig.start('a', { ...idleEnv, ...(await wall.env()) });
    await rig.start('b', idleEnv);
    rig.enqueue(size.executions);
    await waitForRequests(rig, 4, 30_000);
    const coordinator = rig.coordinator();
    rig.emulator.setFaults([
      { operation: 'tasks.poll', kind: 'rateLimit', retryAfterSeconds: size.pauseSeconds, count: 1 },
    ]);
    if (!(await waitUntil(() => rig.emulator.requests().some((r) => r.status === 429), 30_000)))
      throw new Error('no poll met the injected 429 within 30 s');
    const pausedAt = rig.emulator.requests().find((r) => r.status === 429)!.at;
    const pauseEndsAt = pausedAt + size.pauseSeconds * 1_000;
    await faultWindow((size.pauseSeconds * 1_000) / 4);
    await wall.set(HOUR_BACK);
    await faultWindow(Math.max(0, pauseEndsAt - Date.now()) + size.watchMs);
    const during = arrivals(rig, pausedAt + 1, pauseEndsAt);
    const after = arrivals(rig, pauseEndsAt, pauseEndsAt + size.watchMs);
    const reportsAfter = rig.emulator
      .requests()
      .filter((r) => r.at >= pauseEndsAt && r.operation === 'executions.report').length;
    // Let what was claimed be reported before the tally.
    await waitUntil(() => rig.figures().lost === 0, 10_000);
    const f = rig.figures();
    const tally: Tally = { ...f, wrong: 0, unclaimed: size.executions - f.claimed };
    const budget: BudgetFigures = {
      rateLimited: f.rateLimited - 1,
      maxPerSecond: f.maxPerSecond,
      maxPerMinute: f.maxPerMinute,
      requests: rig.emulator.requests().length,
    };
    const resumedMs = firstAfter(rig, pauseEndsAt);
    const expected = Math.floor(expectedRequests(size) / 2);
    const completed =
      during.length === 0 &&
      resumedMs <= 1_000 &&
      after.length >= expected &&
      reportsAfter > 0 &&
      f.lost === 0 &&
      withinLimits(budget, size.perMinute);
    return {
      completed,
      figures: figuresOf(tally),
      tally,
      budget,
      detail:
        `coordinator ${coordinator}; ${during.length} requests during the ${size.pauseSeconds} s pause, ` +
        `${after.length} in the ${size.watchMs / 1000} s after it (>= ${expected} expected; reports ` +
        `${reportsAfter}), the first ${resumedMs} ms after its end (429s beyond the injected one counted)`,
    };
  } finally {
    await rig.dispose();
  }
}

async function waitUntil(condition: () => boolean, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return true;
}

async function waitForRequests(rig: ClusterRig, count: number, timeoutMs: number): Promise<void> {
  if (!(await waitUntil(() => rig.emulator.requests().length >= count, timeoutMs)))
    throw new Error(`fewer than ${count} requests reached the service in ${timeoutMs} ms`);
}
