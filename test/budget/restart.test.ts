// The per-second and per-minute windows across restarts: a Budget loaded from the state folder right after
// another one stopped (crashed, even) waits for what that one sent, as the service counts it.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Operation } from '../../src/api/types.ts';
import { Budget } from '../../src/budget/budget.ts';
import { maxInWindow } from '../../src/budget/sliding-window.ts';
import {
  fileBudgetStore,
  memoryBudgetStore,
  type BudgetState,
  type BudgetStore,
} from '../../src/budget/store.ts';
import { mulberry32 } from '../../src/clock/seeded-random.ts';
import { ManualClock, flushMicrotasks } from '../../src/clock/manual-clock.ts';

const limits = { perSecond: 5, perMinute: 50, perMonth: 40_000 };
const MARGIN_MS = 200;
const START = Date.UTC(2026, 10, 16, 12);

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'df-budget-restart-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Writes under way to any store of `budgetIn`, so a test can wait for the disk instead of spinning. */
const writing = new Set<Promise<void>>();

/** A Budget on `inner` (default: the folder's budget.json); `outer` stands between it and the tracked store. */
function budgetIn(
  clock: ManualClock,
  inner: BudgetStore = fileBudgetStore(dir),
  outer: (store: BudgetStore) => BudgetStore = (store) => store,
): Budget {
  const tracked: BudgetStore = {
    load: () => inner.load(),
    save: (state) => {
      const write = inner.save(state);
      const tracked = write.finally(() => writing.delete(tracked));
      writing.add(tracked);
      return write;
    },
  };
  return new Budget({ limits, clock, store: outer(tracked), safetyMarginMs: MARGIN_MS });
}

/** Until the writes under way have reached the disk, and what follows them has run. */
async function writesDone(): Promise<void> {
  await Promise.allSettled([...writing]);
  await flushMicrotasks(1);
}

/**
 * Lets the budget work until `done()`: real time passes only while it writes to its real file, the clock
 * moves only while it sleeps (to its next wake-up), so no write ever straddles a tick of the clock.
 */
async function runUntil(clock: ManualClock, done: () => boolean, maxSteps = 1_000): Promise<void> {
  for (let i = 0; i < maxSteps && !done(); i++) {
    if (clock.nextWakeAt === undefined) await writesDone();
    else await clock.advance(clock.nextWakeAt - clock.now());
  }
  if (!done()) throw new Error('the budget did not get there');
}

/** Asks for `count` sends at once; each resolved send pushes its instant to `sent`. */
function ask(budget: Budget, clock: ManualClock, count: number, sent: number[], signal?: AbortSignal): void {
  for (let i = 0; i < count; i++) {
    budget.acquire('tasks.poll', signal).then(
      () => sent.push(clock.now()),
      () => undefined,
    );
  }
}

describe('Budget windows across a restart', () => {
  it('makes a Budget loaded right after another sent 5 in a second wait out that second', async () => {
    const clock = new ManualClock(START);
    const sent: number[] = [];
    const first = budgetIn(clock);
    expect(await first.load()).toBe('fresh');
    ask(first, clock, 5, sent);
    await runUntil(clock, () => sent.length === 5);
    expect(sent).toEqual([START, START, START, START, START]);

    // kill -9: no flush. The next run starts 10 ms later on the same folder.
    await clock.advance(10);
    const second = budgetIn(clock);
    expect(await second.load()).toBe('restored');
    expect(second.snapshot().second.used).toBe(5);
    ask(second, clock, 5, sent);
    await runUntil(clock, () => sent.length === 10);

    expect(sent[5]! - START).toBeGreaterThanOrEqual(1_000 + MARGIN_MS);
    expect(maxInWindow(sent, 1_000 + MARGIN_MS)).toBe(5);
  });

  it('makes a Budget loaded right after another sent 50 in a minute wait out that minute', async () => {
    const clock = new ManualClock(START);
    const sent: number[] = [];
    const first = budgetIn(clock);
    await first.load();
    ask(first, clock, 50, sent);
    await runUntil(clock, () => sent.length === 50);
    // 50 at 5 per 1.2 s took about 11 s: most of the minute is still to run when the next run starts.
    expect(sent[49]! - START).toBeLessThan(12_000);

    await clock.advance(50);
    const second = budgetIn(clock);
    await second.load();
    expect(second.snapshot().minute.used).toBe(50);
    ask(second, clock, 10, sent);
    await runUntil(clock, () => sent.length === 60);

    expect(sent[50]! - START).toBeGreaterThanOrEqual(60_000 + MARGIN_MS);
    expect(maxInWindow(sent, 60_000 + MARGIN_MS)).toBe(50);
    expect(maxInWindow(sent, 1_000 + MARGIN_MS)).toBe(5);
  });

  it('after a clean stop too, and keeps the month count exact', async () => {
    const clock = new ManualClock(START);
    const sent: number[] = [];
    const first = budgetIn(clock);
    await first.load();
    ask(first, clock, 5, sent);
    await runUntil(clock, () => sent.length === 5);
    await first.flush();

    const second = budgetIn(clock);
    await second.load();
    expect(second.monthUsed).toBe(5);
    ask(second, clock, 1, sent);
    await runUntil(clock, () => sent.length === 6);
    expect(sent[5]).toBe(START + 1_000 + MARGIN_MS);
  });

  it('takes the windows as full at the load instant when budget.json cannot be read', async () => {
    await writeFile(join(dir, 'budget.json'), '{"monthKey": "2026-11", "used": 12, "sentAt": [1, "2"]}');
    const clock = new ManualClock(START);
    const budget = budgetIn(clock);
    expect(await budget.load()).toBe('estimated');
    expect(budget.snapshot().minute.used).toBe(50);
    // Until this run's first write the file stays unreadable: a run after a crash now assumes the same.
    expect(await budgetIn(clock).load()).toBe('estimated');
    const sent: number[] = [];
    ask(budget, clock, 1, sent);
    await runUntil(clock, () => sent.length === 1);
    // Whatever the run before sent, it sent it before this one loaded: a minute (and the margin) later is safe.
    expect(sent[0]).toBe(START + 60_000 + MARGIN_MS);
  });

  it('loads a budget.json written before the windows were kept (monthKey and used only)', async () => {
    await writeFile(join(dir, 'budget.json'), '{"monthKey": "2026-11", "used": 1234}\n');
    const clock = new ManualClock(START);
    const budget = budgetIn(clock);
    expect(await budget.load()).toBe('restored');
    expect(budget.monthUsed).toBe(1_234);
    await budget.acquire('tasks.poll');
    expect(clock.now()).toBe(START);
    expect(budget.monthUsed).toBe(1_235);
  });

  it('keeps a saved send of the minute before a new month in the windows of the new month', async () => {
    await writeFile(
      join(dir, 'budget.json'),
      JSON.stringify({ monthKey: '2026-10', used: 39_000, sentAt: [Date.UTC(2026, 10, 1) - 500] }),
    );
    const clock = new ManualClock(Date.UTC(2026, 10, 1) + 100);
    const budget = budgetIn(clock);
    expect(await budget.load()).toBe('fresh');
    expect(budget.snapshot()).toMatchObject({ second: { used: 1 }, month: { used: 0 } });
  });
});

describe('Budget write-ahead of the windows', () => {
  it('stores a send before it goes, with one write for all the waiters that may go at once', async () => {
    const clock = new ManualClock(START);
    const saves: BudgetState[] = [];
    const inner = fileBudgetStore(dir);
    const store: BudgetStore = {
      load: inner.load,
      save: async (state) => {
        await inner.save(state);
        saves.push(state);
      },
    };
    const budget = budgetIn(clock, store);
    await budget.load();
    const sent: number[] = [];
    ask(budget, clock, 12, sent);
    await runUntil(clock, () => sent.length === 12);
    // 5 + 5 + 2: three groups of sends, three writes.
    expect(saves).toHaveLength(3);
    for (const [i, at] of sent.entries()) {
      // Every send was in the store before it went, at an instant no earlier than the send's own.
      const group = saves[Math.floor(i / 5)]!;
      expect(group.sentAt!.filter((saved) => saved >= at).length).toBeGreaterThanOrEqual((i % 5) + 1);
    }
  });

  it('writes again, with a longer allowance, when a write took longer than its sends were written for', async () => {
    const clock = new ManualClock(START);
    const inner = memoryBudgetStore();
    const saves: BudgetState[] = [];
    // A slow disk: the first write takes 300 ms of the clock, later ones none.
    const store: BudgetStore = {
      load: inner.load,
      save: async (state) => {
        if (saves.length === 0) clock.set(clock.now() + 300);
        saves.push(state);
        await inner.save(state);
      },
    };
    const budget = budgetIn(clock, store);
    await budget.load();
    await budget.acquire('executions.report');
    const sentAt = clock.now();
    expect(sentAt).toBe(START + 300);
    expect(saves).toHaveLength(2);
    // The first write said "sent by START + 100": not true of a send at START + 300, so it was not used.
    expect(saves[0]!.sentAt![0]).toBeLessThan(sentAt);
    expect(saves[1]!.sentAt![0]).toBeGreaterThanOrEqual(sentAt);
  });

  it('never lets a window overflow across crashes and restarts under random arrivals', async () => {
    const { sent, requested, killedInWrite } = await simulateRestarts(() => fileBudgetStore(dir), 7);
    // Demand exceeded the limits, so the windows were put to the test, kills in a write included.
    expect(requested).toBeGreaterThan(2 * sent.length);
    expect(sent.length).toBeGreaterThan(100);
    expect(killedInWrite).toBeGreaterThan(0);
    expect(maxInWindow(sent, 1_000 + MARGIN_MS)).toBeLessThanOrEqual(5);
    expect(maxInWindow(sent, 60_000 + MARGIN_MS)).toBeLessThanOrEqual(50);
  }, 60_000);

  it('(the same arrivals and crashes with windows that forget at each restart overflow the minute)', async () => {
    const { sent } = await simulateRestarts(() => memoryBudgetStore(), 7);
    expect(maxInWindow(sent, 60_000)).toBeGreaterThan(50);
  }, 60_000);
});

/** A small seeded generator: the same arrivals and crashes on every run of the test. */
const seeded = mulberry32;

const OPERATIONS: Operation[] = ['tasks.poll', 'tasks.poll', 'tasks.poll', 'executions.report', 'tasks.list'];

/**
 * Eight runs on one state folder, each killed (no flush) after 5 to 40 s and restarted 0 to 2 s later. Requests
 * arrive as a Poisson process of 8 per second (above the 5/s and 50/min limits); a killed run's waiting requests
 * are never sent. Some kills land between a write and the sends it was for. Returns every send's instant.
 */
async function simulateRestarts(
  storeOfRun: () => BudgetStore,
  seed: number,
): Promise<{ sent: number[]; requested: number; killedInWrite: number }> {
  const random = seeded(seed);
  const exponential = (meanMs: number) => -Math.log(1 - random()) * meanMs;
  const clock = new ManualClock(START);
  const sent: number[] = [];
  let requested = 0;
  let killedInWrite = 0;
  for (let run = 0; run < 8; run++) {
    const killAt = clock.now() + 5_000 + random() * 35_000;
    // Now and then the kill lands after a write reached the disk but before its sends went.
    const killInWrite = random() < 0.3;
    const run$ = { dead: false };
    const budget = budgetIn(clock, storeOfRun(), (store) =>
      dying(store, run$, killInWrite ? killAt : Infinity, clock),
    );
    await budget.load();
    const stop = new AbortController();
    let nextArrival = clock.now() + exponential(125);
    // A kill in a write comes with the first write from `killAt` on.
    const until = killInWrite ? Infinity : killAt;
    while (!run$.dead && clock.now() < until) {
      while (nextArrival <= clock.now()) {
        requested++;
        const operation = OPERATIONS[Math.floor(random() * OPERATIONS.length)]!;
        budget.acquire(operation, stop.signal).then(
          () => {
            if (!run$.dead) sent.push(clock.now());
          },
          () => undefined,
        );
        nextArrival += exponential(125);
      }
      await parked(budget, clock, run$);
      const wake = clock.nextWakeAt ?? Infinity;
      await clock.advance(Math.max(0, Math.min(nextArrival, until, wake) - clock.now()));
    }
    if (run$.dead) killedInWrite++;
    run$.dead = true;
    stop.abort(new Error('killed'));
    await flushMicrotasks();
    await clock.advance(Math.floor(random() * 2_000));
  }
  return { sent, requested, killedInWrite };
}

/** Waits (in real time, the clock stopped) until the budget sleeps or has nothing to do: no write in flight. */
async function parked(budget: Budget, clock: ManualClock, run: { dead: boolean }): Promise<void> {
  while (!run.dead && budget.snapshot().waiting > 0 && clock.pending === 0) await writesDone();
}

/**
 * A store that dies with its process: from `killAt`, a write still reaches the disk but the process is gone
 * before it learns so (its sends never go); after that, nothing is written.
 */
function dying(store: BudgetStore, run: { dead: boolean }, killAt: number, clock: ManualClock): BudgetStore {
  return {
    load: () => store.load(),
    save: async (state) => {
      if (run.dead) return new Promise<void>(() => undefined);
      await store.save(state);
      if (clock.now() >= killAt) {
        run.dead = true;
        return new Promise<void>(() => undefined);
      }
    },
  };
}
