// Two tasks on one worker, on the manual clock: `flood` always has work pending and its handlers run long,
// `rare` gets seeded Poisson arrivals of short executions. Measures the rare task's pickup (enqueued to
// claimed), with the real budget, planner and scheduler against the emulator in process. Shared by
// test/scheduler/fairness.test.ts and bench/fairness.ts (npm run bench:fairness).
import { pino } from 'pino';
import type { TaskExecution } from '../../src/api/types.ts';
import { ManualClock } from '../../src/clock/manual-clock.ts';
import { Emulator } from '../../src/emulator/index.ts';
import { PollPlanner } from '../../src/scheduler/poll-planner.ts';
import { Scheduler } from '../../src/scheduler/scheduler.ts';
import { seededRandom, serviceOnClock } from '../clock/virtual-time.ts';

const KEY = 'fairness-key';
const START = Date.UTC(2026, 10, 27, 12);

export interface FairnessRun {
  /** Scheduler option: false is the shared pool of before (no fair share). */
  fairShare: boolean;
  /** DF_CONCURRENCY. */
  concurrency: number;
  /** Clock time simulated, in ms. */
  durationMs: number;
  /** How long each flood execution's handler runs, in clock ms. */
  floodRunMs: number;
  /** How long each rare execution's handler runs, in clock ms. */
  rareRunMs: number;
  /** Mean gap between the rare task's arrivals (exponential gaps), in clock ms. */
  rareMeanGapMs: number;
  /** The flood task's own defineTask `concurrency`, if any. */
  floodConcurrency?: number;
  /** Idle poll interval cap (DF_POLL_MAX_INTERVAL_MS), in ms. */
  maxPollIntervalMs: number;
  seed: number;
}

export interface FairnessResult {
  /** The rare task's pickups, in clock ms, in arrival order. */
  rarePickupsMs: number[];
  /** Rare executions enqueued (a pickup each if none was left unclaimed). */
  rareArrivals: number;
  floodCompleted: number;
  /** Most executions running at once, and most of the flood task. */
  mostRunning: number;
  mostFloodRunning: number;
  requests: number;
}

export async function runFairness(run: FairnessRun): Promise<FairnessResult> {
  const clock = new ManualClock(START);
  const limits = { perSecond: 5, perMinute: 50 };
  const emulator = new Emulator({ clock, apiKeys: [KEY], limits: { ...limits, perMonth: 0 } });
  const { budget, client } = serviceOnClock(emulator, clock, {
    apiKey: KEY,
    limits: { ...limits, perMonth: 1_000_000 },
  });
  const flood = emulator.createTask({ key: 'flood' });
  const rare = emulator.createTask({ key: 'rare' });
  const planner = new PollPlanner({
    budget,
    maxPollIntervalMs: run.maxPollIntervalMs,
    errorBackoff: { baseMs: 1_000, maxMs: 8_000, random: () => 0.5 },
  });
  planner.setTasks(
    [flood, rare].map((t) => ({ id: t.id, key: t.key })),
    clock.now(),
  );
  const enqueuedAt = new Map<string, number>();
  const pickups: number[] = [];
  let running = 0;
  let floodRunning = 0;
  let mostRunning = 0;
  let mostFloodRunning = 0;
  let floodCompleted = 0;
  // The flood never runs dry: a new execution is queued for each one claimed.
  const queueFlood = () => emulator.enqueueExecution(flood.id, {});
  for (let i = 0; i < run.concurrency * 2; i++) queueFlood();
  const scheduler = new Scheduler({
    client,
    planner,
    clock,
    logger: pino({ level: 'silent' }),
    concurrency: run.concurrency,
    fairShare: run.fairShare,
    taskConcurrency: (task) => (task.taskId === flood.id ? run.floodConcurrency : undefined),
    unauthorizedRetryMs: 120_000,
    dispatch: async (task, execution: TaskExecution) => {
      const isFlood = task.taskId === flood.id;
      mostRunning = Math.max(mostRunning, ++running);
      if (isFlood) {
        mostFloodRunning = Math.max(mostFloodRunning, ++floodRunning);
        queueFlood();
      } else {
        pickups.push(clock.now() - enqueuedAt.get(execution.id)!);
      }
      try {
        await clock.sleep(isFlood ? run.floodRunMs : run.rareRunMs);
        await client.reportExecution(execution.id, { status: 'COMPLETED', output: {} });
        if (isFlood) floodCompleted++;
      } catch {
        // Unreported: counted by floodCompleted and the rare pickups.
      } finally {
        running--;
        if (isFlood) floodRunning--;
      }
    },
  });
  const random = seededRandom(run.seed);
  const controller = new AbortController();
  const loop = scheduler.run(controller.signal);
  const endAt = START + run.durationMs;
  let rareArrivals = 0;
  for (let at = START - Math.log(1 - random()) * run.rareMeanGapMs; at < endAt;) {
    await clock.advance(at - clock.now());
    enqueuedAt.set(emulator.enqueueExecution(rare.id, {}).id, clock.now());
    rareArrivals++;
    at += -Math.log(1 - random()) * run.rareMeanGapMs;
  }
  await clock.advance(endAt - clock.now());
  controller.abort(new Error('run over'));
  // Executions still running end on the clock; polls out are answered in process.
  const drained = scheduler.drained();
  let settled = false;
  void drained.finally(() => (settled = true));
  await loop;
  while (!settled) await clock.advance(run.floodRunMs);
  return {
    rarePickupsMs: pickups,
    rareArrivals,
    floodCompleted,
    mostRunning,
    mostFloodRunning,
    requests: emulator.requests().length,
  };
}

/** The q-quantile (0..1) of `values` by nearest rank; NaN when empty. */
export function quantile(values: number[], q: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
}
