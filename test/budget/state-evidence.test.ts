import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Budget } from '../../src/budget/budget.ts';
import {
  BudgetStateLostError,
  budgetFile,
  checkedBudgetStore,
  fileBudgetStore,
  handOffBudgetStore,
  type PriorUse,
} from '../../src/budget/store.ts';
import { ManualClock } from '../../src/clock/manual-clock.ts';

const limits = { perSecond: 5, perMinute: 50, perMonth: 40_000 };
const NOW = Date.UTC(2026, 10, 16); // half of November gone
let dir: string;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'df-budget-evidence-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const unused: PriorUse = { stateFolderUsed: false, requestsAt: [] };
const store = (prior: PriorUse) => checkedBudgetStore(fileBudgetStore(dir), budgetFile(dir), prior);
const save = (state: object) => writeFile(budgetFile(dir), `${JSON.stringify(state)}\n`);

async function loaded(prior: PriorUse) {
  const clock = new ManualClock(NOW);
  const budget = new Budget({ limits, clock, store: store(prior) });
  return { budget, clock, result: await budget.load() };
}

describe('a budget.json the rest of the state folder contradicts', () => {
  it('is a first start only where the state folder was never used', async () => {
    expect((await loaded(unused)).result).toBe('fresh');
  });

  it('missing from a used state folder: estimated, windows full at start, never fresh', async () => {
    const prior = { stateFolderUsed: true, requestsAt: [] };
    await expect(store(prior).load()).rejects.toThrow(
      /budget\.json is missing from a state folder an earlier run used.*the windows are taken as full at start/,
    );
    const { budget, clock, result } = await loaded(prior);
    expect(result).toBe('estimated');
    expect(budget.monthUsed).toBe(20_000);
    // The previous run may have sent a whole minute's worth just before it stopped.
    expect(budget.earliestSendAt('poll', clock.now())).toBeGreaterThanOrEqual(NOW + 60_000);
  });

  it('counting fewer requests than the journal and the lock show: estimated, with the reason', async () => {
    await save({ monthKey: '2026-11', used: 0, sentAt: [] });
    const requestsAt = [NOW - 5_000, NOW - 4_000, Date.UTC(2026, 9, 31)];
    const checked = store({ stateFolderUsed: true, requestsAt });
    await expect(checked.load()).rejects.toBeInstanceOf(BudgetStateLostError);
    // October's request does not count against November's figure.
    expect(checked.problem).toMatch(
      /counts 0 requests in 2026-11, where the journal and the lock show at least 2/,
    );
    expect((await loaded({ stateFolderUsed: true, requestsAt })).result).toBe('estimated');
  });

  it('of an earlier month while the journal shows requests since: estimated', async () => {
    await save({ monthKey: '2026-10', used: 39_000, sentAt: [] });
    const prior = { stateFolderUsed: true, requestsAt: [NOW - 5_000] };
    expect((await loaded(prior)).result).toBe('estimated');
  });

  it('that holds at least what the journal shows is restored as it is', async () => {
    await save({ monthKey: '2026-11', used: 2, sentAt: [NOW - 4_000] });
    const { budget, result } = await loaded({
      stateFolderUsed: true,
      requestsAt: [NOW - 5_000, NOW - 4_000],
    });
    expect(result).toBe('restored');
    expect(budget.monthUsed).toBe(2);
  });

  it('an unreadable file is still estimated through the check', async () => {
    await writeFile(budgetFile(dir), '{"monthKey": "2026-11", "us');
    expect((await loaded({ stateFolderUsed: true, requestsAt: [] })).result).toBe('estimated');
  });
});

describe('handing the budget over after the lock was lost', () => {
  it('writes where no budget.json is, and over its own file, never over the new owner’s', async () => {
    const file = budgetFile(join(dir, 'gone'));
    const handOff = handOffBudgetStore(file, NOW + 10_000);
    await handOff.save({ monthKey: '2026-11', used: 10, sentAt: [NOW] });
    expect(JSON.parse(await readFile(file, 'utf8'))).toEqual({
      monthKey: '2026-11',
      used: 10,
      sentAt: [NOW],
      handedOverUntil: NOW + 10_000,
    });
    handOff.done();
    await handOff.save({ monthKey: '2026-11', used: 11, sentAt: [NOW, NOW + 1] });
    expect(JSON.parse(await readFile(file, 'utf8'))).toEqual({
      monthKey: '2026-11',
      used: 11,
      sentAt: [NOW, NOW + 1],
    });
    const owners = '{"monthKey":"2026-11","used":12,"sentAt":[]}\n';
    await writeFile(file, owners);
    await handOff.save({ monthKey: '2026-11', used: 13, sentAt: [] });
    expect(await readFile(file, 'utf8')).toBe(owners);
  });

  it('a checked store switches its saves to the hand-over', async () => {
    const checked = store(unused);
    await checked.save({ monthKey: '2026-11', used: 1, sentAt: [] });
    const owners = '{"monthKey":"2026-11","used":5,"sentAt":[]}\n';
    await writeFile(budgetFile(dir), owners);
    checked.handOff(NOW + 10_000);
    await checked.save({ monthKey: '2026-11', used: 2, sentAt: [] });
    expect(await readFile(budgetFile(dir), 'utf8')).toBe(owners);
  });

  it('the next owner waits while the hand-over runs, then reads the last state the old owner left', async () => {
    const old = handOffBudgetStore(budgetFile(dir), Date.now() + 30_000);
    await old.save({ monthKey: '2026-11', used: 10, sentAt: [NOW] });
    const waits: number[] = [];
    const next = checkedBudgetStore(fileBudgetStore(dir), budgetFile(dir), unused, {
      onHandOverWait: (until) => waits.push(until),
    });
    let waited = false;
    const waiting = next.waitForHandOver().then(() => (waited = true));
    await expect.poll(() => waits.length).toBe(1);
    expect(waited).toBe(false);
    // The old owner's last reports, then its final save: the next owner reads that one.
    old.done();
    await old.save({ monthKey: '2026-11', used: 12, sentAt: [NOW, NOW + 1, NOW + 2] });
    await waiting;
    expect(await next.load()).toEqual({ monthKey: '2026-11', used: 12, sentAt: [NOW, NOW + 1, NOW + 2] });
    expect(waits).toHaveLength(1);
  });

  it('stops waiting at the instant the old owner gave, whatever it left', async () => {
    // Measured against the instant written, not the start of the wait: the save itself (an fsync) may take
    // a good part of the 300 ms on a busy disk.
    const until = Date.now() + 300;
    await save({ monthKey: '2026-11', used: 10, sentAt: [], handedOverUntil: until });
    const checked = store(unused);
    await checked.waitForHandOver();
    expect(Date.now()).toBeGreaterThanOrEqual(until);
    expect(await checked.load()).toEqual({ monthKey: '2026-11', used: 10, sentAt: [] });
  });
});
