// The standard workloads of the month replay: seeded arrivals for a month, and the arrivals file format
// (`{"task":"<key>","at":"<ISO 8601>"}` per line).
import { readFile, writeFile } from 'node:fs/promises';
import { calendarMonthWindow, parseMonthKey } from '../budget/month.ts';
import { mulberry32 } from '../clock/seeded-random.ts';
import type { Arrival } from './types.ts';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;

export { mulberry32 } from '../clock/seeded-random.ts';

/** [start, end) of a `YYYY-MM` month in UTC. */
export function monthBounds(month = '2026-11'): { startsAt: number; endsAt: number } {
  const parsed = parseMonthKey(month);
  if (!parsed) throw new Error(`month must be YYYY-MM, not '${month}'`);
  const { startMs, endMs } = calendarMonthWindow(parsed.year, parsed.month, 'UTC');
  return { startsAt: startMs, endsAt: endMs };
}

/**
 * A non-homogeneous Poisson process by thinning: `ratePerHour(t)` at most `maxPerHour`; each arrival's task
 * is one of `tasks`, drawn at random.
 */
function thinned(
  seed: number,
  month: string,
  maxPerHour: number,
  ratePerHour: (t: number) => number,
  tasks: readonly string[] = ['work'],
): Arrival[] {
  const random = mulberry32(seed);
  const { startsAt, endsAt } = monthBounds(month);
  const arrivals: Arrival[] = [];
  for (let t = startsAt; ;) {
    t += (-Math.log(1 - random()) * HOUR) / maxPerHour;
    if (t >= endsAt) return arrivals;
    const keep = random() * maxPerHour < ratePerHour(t);
    const task = tasks[Math.floor(random() * tasks.length)]!;
    if (keep) arrivals.push({ task, at: Math.round(t) });
  }
}

const weekday = (t: number) => {
  const d = new Date(t).getUTCDay();
  return d >= 1 && d <= 5;
};
const hourOf = (t: number) => new Date(t).getUTCHours();

export interface Workload {
  name: string;
  description: string;
  /** True when the month's budget cannot carry it (the goal is then claims and polling to the end). */
  overload?: boolean;
  /** True when the rate varies in time (the goal is then p95 at most half the best fixed poller's). */
  timeVarying?: boolean;
  generate: (seed: number, month?: string) => Arrival[];
  /**
   * Expected arrivals per hour at an instant of `month`, where the rate varies in time: what a poller that knew
   * the hours in advance would go by (see bestByHourInHindsight).
   */
  ratePerHour?: (t: number, month?: string) => number;
  /** Where the pattern moves within the month: the instant it does, in `month`. */
  movesAt?: (month?: string) => number;
}

const businessHours = (t: number) => (weekday(t) && hourOf(t) >= 8 && hourOf(t) < 18 ? 15 : 0);
function weeklyPattern(t: number): number {
  const h = hourOf(t);
  if (!weekday(t)) return h >= 10 && h < 16 ? 0.5 : 0;
  if ((h >= 9 && h < 12) || (h >= 14 && h < 17)) return 20;
  return h >= 7 && h < 20 ? 2 : 0.5;
}
/** The weekly pattern whose peaks move to 18-23 from the 15th of `month` (the instant worked out once). */
const patternMovesAt = (month = '2026-11') => monthBounds(month).startsAt + 14 * 24 * HOUR;
function patternChange(month: string): (t: number) => number {
  const change = patternMovesAt(month);
  return (t) => {
    const h = hourOf(t);
    if (!weekday(t)) return h >= 10 && h < 16 ? 0.5 : 0;
    const peak = t < change ? (h >= 9 && h < 12) || (h >= 14 && h < 17) : h >= 18 && h < 23;
    return peak ? 20 : 0.5;
  };
}

export const WORKLOADS: readonly Workload[] = [
  {
    name: 'poisson-5min',
    description: '1 task, Poisson, 1 execution per 5 min',
    generate: (seed, month = '2026-11') => thinned(seed, month, 12, () => 12),
  },
  {
    name: 'poisson-hourly',
    description: '1 task, Poisson, 1 per hour',
    generate: (seed, month = '2026-11') => thinned(seed, month, 1, () => 1),
  },
  {
    name: 'ten-tasks',
    description: '10 tasks, Poisson, 1 per 10 min in total',
    generate: (seed, month = '2026-11') =>
      thinned(
        seed,
        month,
        6,
        () => 6,
        Array.from({ length: 10 }, (_, i) => `task-${i}`),
      ),
  },
  {
    name: 'business-hours',
    description: '1 task, Mon-Fri 08-18 UTC only, Poisson 1 per 4 min inside',
    timeVarying: true,
    generate: (seed, month = '2026-11') => thinned(seed, month, 15, businessHours),
    ratePerHour: businessHours,
  },
  {
    name: 'weekly-pattern',
    description:
      '1 task, weekday peaks 09-12 and 14-17 (20/h), 2/h other daytime, 0.5/h nights, quiet weekends',
    timeVarying: true,
    generate: (seed, month = '2026-11') => thinned(seed, month, 20, weeklyPattern),
    ratePerHour: weeklyPattern,
  },
  {
    name: 'pattern-change',
    description: 'as weekly-pattern, but from the 15th the peaks move to 18-23',
    timeVarying: true,
    generate: (seed, month = '2026-11') => thinned(seed, month, 20, patternChange(month)),
    ratePerHour: (t, month = '2026-11') => patternChange(month)(t),
    movesAt: patternMovesAt,
  },
  {
    name: 'overload',
    description: '1 task, Poisson 1 per 2 min: more than the month can carry',
    overload: true,
    generate: (seed, month = '2026-11') => thinned(seed, month, 30, () => 30),
  },
  {
    name: 'batches',
    description: '1 task, ~3 batches a day of 20-200 executions within seconds: beyond the month',
    overload: true,
    generate: (seed, month = '2026-11') => {
      const random = mulberry32(seed);
      const { startsAt, endsAt } = monthBounds(month);
      const arrivals: Arrival[] = [];
      for (let t = startsAt; ;) {
        t += (-Math.log(1 - random()) * 24 * HOUR) / 3;
        if (t >= endsAt) return arrivals;
        const size = 20 + Math.floor(random() * 181);
        for (let i = 0; i < size; i++) {
          const at = Math.round(t + random() * 5_000);
          if (at < endsAt) arrivals.push({ task: 'work', at });
        }
      }
    },
  },
];

export function workload(name: string): Workload {
  const found = WORKLOADS.find((w) => w.name === name);
  if (!found) throw new Error(`no workload '${name}'; known: ${WORKLOADS.map((w) => w.name).join(', ')}`);
  return found;
}

/** Reads an arrivals file; names the line of any that is not `{"task": "<key>", "at": "<ISO 8601>"}`. */
export async function readArrivals(path: string): Promise<Arrival[]> {
  const text = await readFile(path, 'utf8');
  const arrivals: Arrival[] = [];
  text.split('\n').forEach((line, index) => {
    if (line.trim() === '') return;
    const where = `${path}:${index + 1}`;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      throw new Error(`${where}: not JSON`);
    }
    const { task, at } = (value ?? {}) as { task?: unknown; at?: unknown };
    if (typeof task !== 'string' || task === '') throw new Error(`${where}: "task" must be a task key`);
    const ms = typeof at === 'string' ? Date.parse(at) : NaN;
    if (!Number.isFinite(ms)) throw new Error(`${where}: "at" must be an ISO 8601 instant`);
    arrivals.push({ task, at: ms });
  });
  return arrivals.sort((a, b) => a.at - b.at);
}

export async function writeArrivals(path: string, arrivals: readonly Arrival[]): Promise<void> {
  const lines = arrivals.map((a) => JSON.stringify({ task: a.task, at: new Date(a.at).toISOString() }));
  await writeFile(path, lines.length === 0 ? '' : `${lines.join('\n')}\n`);
}
