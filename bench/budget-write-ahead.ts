// What the budget's write-ahead costs per request: before a request goes, its send instant (and the month's
// lease) is in DF_STATE_DIR/budget.json, written with fsync and rename. Measured one request at a time (one
// write each) and in groups of 5 that may go together (one write for the group), against a store in memory.
//   npm run bench:budget [-- --requests 500]
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Budget } from '../src/budget/budget.ts';
import { fileBudgetStore, memoryBudgetStore, type BudgetStore } from '../src/budget/store.ts';
import { ManualClock } from '../src/clock/manual-clock.ts';

const { values } = parseArgs({ options: { requests: { type: 'string', default: '500' } } });
const requests = Number(values.requests);
const limits = { perSecond: 5, perMinute: 50, perMonth: 1_000_000 };

/**
 * Real time per request through `acquire`, groups of `group` asked at once. The clock moves 1.3 s per request
 * after each group, so the windows never hold a request back and budget.json holds what a busy daemon's does
 * (about 46 sends of the last minute).
 */
async function measure(store: BudgetStore, group: number): Promise<{ meanMs: number; p99Ms: number }> {
  const clock = new ManualClock(Date.UTC(2026, 10, 16));
  const budget = new Budget({ limits, clock, store });
  await budget.load();
  const perRequestMs: number[] = [];
  for (let sent = 0; sent < requests; sent += group) {
    const t0 = performance.now();
    await Promise.all(Array.from({ length: group }, () => budget.acquire('tasks.poll')));
    const ms = (performance.now() - t0) / group;
    for (let i = 0; i < group; i++) perRequestMs.push(ms);
    clock.set(clock.now() + group * 1_300);
  }
  perRequestMs.sort((a, b) => a - b);
  const mean = perRequestMs.reduce((a, b) => a + b, 0) / perRequestMs.length;
  const round = (ms: number) => Math.round(ms * 1000) / 1000;
  return { meanMs: round(mean), p99Ms: round(perRequestMs[Math.floor(perRequestMs.length * 0.99)]!) };
}

/** The measure on a budget.json of its own: each run's clock starts afresh, its sends must not be in the file. */
async function measureInFolder(group: number): Promise<{ meanMs: number; p99Ms: number }> {
  const dir = await mkdtemp(join(tmpdir(), 'df-worker-budget-bench-'));
  try {
    return await measure(fileBudgetStore(dir), group);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

const result = {
  requests,
  fileOneAtATime: await measureInFolder(1),
  fileInGroupsOf5: await measureInFolder(5),
  memoryOneAtATime: await measure(memoryBudgetStore(), 1),
  folder: tmpdir(),
};
console.log(JSON.stringify(result, null, 2));
