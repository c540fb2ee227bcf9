// df-worker's pacing against fixed-interval pollers, on the standard workloads over seeded draws.
//   npm run bench:pacing [-- --draws 5 --workloads poisson-5min,overload --out bench/out/pacing --breakdown]
// Each draw replays November twice: from a cold start (nothing learnt), and warm, as a daemon that ran through
// October keeps it in its state folder (October's arrivals drawn from the same workload with another seed).
// Prints per workload the pollers side by side and df-worker's ratios to the best fixed poller with re-poll
// after a hit (chosen in hindsight), and writes an SVG chart per workload (first draw): cumulative requests
// against the even spend, and p95 pickup by day. On time-varying work it also prints a poller that knows each
// hour's rate in advance, with its busy and quiet intervals chosen in hindsight: how low p95 can go at all.
// On time-varying work each draw also prints what the cold start paid to learn: its first week's polls and
// slow pickups beside the warm start's.
// With --breakdown, on time-varying work, each draw also shows where the three spent their polls and where
// their pickups over p95 fell, by the hour's rate (a pickup over p95 in a peak buys few polls, in a night many).
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { bestByHourInHindsight, bestFixedInHindsight, fixedPoller } from '../src/replay/fixed-poller.ts';
import { replayMonth } from '../src/replay/replay.ts';
import { byRate, followedMove, pickupByDay, spentIn, summarize } from '../src/replay/summary.ts';
import { lineChart } from '../src/replay/svg-chart.ts';
import type { ReplayResult } from '../src/replay/types.ts';
import { monthBounds, WORKLOADS } from '../src/replay/workloads.ts';

const { values } = parseArgs({
  options: {
    draws: { type: 'string', default: '5' },
    workloads: { type: 'string' },
    out: { type: 'string', default: 'bench/out/pacing' },
    breakdown: { type: 'boolean', default: false },
  },
});
const draws = Number(values.draws);
const chosen = values.workloads ? values.workloads.split(',') : WORKLOADS.map((w) => w.name);
const { startsAt, endsAt } = monthBounds('2026-11');
const PER_MONTH = 40_000;
await mkdir(values.out, { recursive: true });

const s = (ms: number) => (Number.isFinite(ms) ? (ms / 1000).toFixed(1) : '-');
const range = (xs: number[]) =>
  xs.length === 0 ? '-' : `${Math.min(...xs).toFixed(2)}–${Math.max(...xs).toFixed(2)}`;
const readme: string[] = [
  '| workload | p95 / best fixed + re-poll | mean / best fixed + re-poll | warm: p95 / mean | never claimed (df-worker / best) | month ran out | 429s | knows the hours: p95 |',
  '|---|---|---|---|---|---|---|---|',
];

for (const name of chosen) {
  const w = WORKLOADS.find((x) => x.name === name);
  if (!w) throw new Error(`no workload '${name}'`);
  console.log(`\n## ${w.name}: ${w.description}`);
  console.log(
    'draw | poller                     | claimed | never | p50 s  | p95 s   | mean s  | requests | 429 | ran out on day',
  );
  const p95Ratios: number[] = [];
  const meanRatios: number[] = [];
  const warmP95Ratios: number[] = [];
  const warmMeanRatios: number[] = [];
  const byHourRatios: number[] = [];
  const firstWeekExtra: number[] = [];
  /** Where the pattern moves: the new peaks' first day's p95 over the old peaks' in the week before, cold and warm. */
  const afterMove = { cold: [] as number[], warm: [] as number[] };
  const never: string[] = [];
  const ranOut: string[] = [];
  let rateLimited = 0;
  for (let draw = 1; draw <= draws; draw++) {
    const arrivals = w.generate(draw * 7_919);
    const started = performance.now();
    const df = await replayMonth({ arrivals });
    const dfMs = performance.now() - started;
    const stateDir = await mkdtemp(join(tmpdir(), 'df-worker-pacing-'));
    let warm: ReplayResult;
    try {
      const october = w.generate(draw * 7_919 + 1, '2026-10');
      await replayMonth({ arrivals: october, month: '2026-10', stateDir });
      warm = { ...(await replayMonth({ arrivals, stateDir })), name: 'df-worker, warm' };
    } finally {
      await rm(stateDir, { recursive: true, force: true });
    }
    const base = { startsAt, endsAt, perMonth: PER_MONTH };
    const pollers: ReplayResult[] = [
      df,
      warm,
      fixedPoller(arrivals, { ...base, intervalMs: 1_000 }),
      fixedPoller(arrivals, { ...base, intervalMs: 5_000 }),
      {
        ...fixedPoller(arrivals, { ...base, intervalMs: (endsAt - startsAt) / PER_MONTH }),
        name: 'budget-exact (64.8 s)',
      },
    ];
    const best = bestFixedInHindsight(arrivals, base);
    const bestRepoll = bestFixedInHindsight(arrivals, { ...base, repollAfterHit: true });
    pollers.push({ ...best, name: `best ${best.name}` }, { ...bestRepoll, name: `best ${bestRepoll.name}` });
    const summaries = pollers.map((p) => summarize(p, PER_MONTH));
    const byHourRun = w.ratePerHour ? bestByHourInHindsight(arrivals, w.ratePerHour, base) : undefined;
    const byHour = byHourRun ? summarize(byHourRun, PER_MONTH) : undefined;
    for (const sm of byHour ? [...summaries, byHour] : summaries) {
      console.log(
        `${String(draw).padEnd(4)} | ${sm.name.padEnd(26)} | ${String(sm.claimed).padStart(7)} | ${String(sm.neverClaimed).padStart(5)} | ` +
          `${s(sm.pickup.p50).padStart(6)} | ${s(sm.pickup.p95).padStart(7)} | ${s(sm.pickup.mean).padStart(7)} | ` +
          `${String(sm.requests).padStart(8)} | ${String(sm.rateLimited).padStart(3)} | ${sm.exhaustedOnDay ?? '-'}`,
      );
    }
    if (values.breakdown && w.ratePerHour && byHourRun && byHour) {
      const runs = [
        [summaries[0]!, pollers[0]!],
        [summaries[1]!, pollers[1]!],
        [byHour, byHourRun],
      ] as const;
      const rows = runs.map(([sm, run]) => byRate(run, w.ratePerHour!, sm.pickup.p95));
      const polls = 'polls: df-worker / warm / knows the hours';
      console.log(`     by rate (/h) | hours | arrivals | ${polls} | over p95, in the same order`);
      rows[0]!.forEach((row, i) => {
        const of = (k: 'polls' | 'slow') => rows.map((r) => String(r[i]![k]).padStart(6)).join(' / ');
        console.log(
          `     ${String(row.ratePerHour).padStart(12)} | ${row.hours.toFixed(0).padStart(5)} | ${String(row.arrivals).padStart(8)} | ${of('polls').padStart(polls.length)} | ${of('slow')}`,
        );
      });
    }
    const dfs = summaries[0]!;
    const ref = summaries.at(-1)!;
    if (w.timeVarying) {
      // What the cold start paid to learn: its first week's polls and slow pickups beside the warm start's.
      const weekEnds = startsAt + 7 * 86_400_000;
      const [c, h] = [0, 1].map((i) => spentIn(pollers[i]!, startsAt, weekEnds, summaries[i]!.pickup.p95));
      firstWeekExtra.push(c!.polls - h!.polls);
      console.log(
        `     first week: polls cold ${c!.polls}, warm ${h!.polls} (${c!.polls - h!.polls} more); ` +
          `over the month's p95: cold ${c!.slow}, warm ${h!.slow} of ${c!.arrivals}`,
      );
    }
    if (w.movesAt && w.ratePerHour) {
      // How soon it follows the move: the new peak hours' first day, beside the old peak hours' last week and
      // the new ones' while they were quiet.
      const movesAt = w.movesAt();
      const rate = (t: number) => w.ratePerHour!(t);
      const runs = { cold: pollers[0]!, warm: pollers[1]!, 'best fixed': bestRepoll };
      let when = 'none';
      const figures = Object.entries(runs).map(([name, run]) => {
        const { day, first, oldPeaks, whileQuiet } = followedMove(run, rate, movesAt);
        if (day) when = new Date(day.startsAt).toUTCString().slice(0, 11);
        if (name === 'cold' || name === 'warm') afterMove[name].push(first.p95 / oldPeaks.p95);
        return `${name} ${s(first.p95)} (${s(oldPeaks.p95)}, ${s(whileQuiet.p95)})`;
      });
      console.log(
        `     after the move, the new peaks' first day (${when}), p95: ${figures.join('; ')} (in the week before: the old peak hours, the new ones while quiet)`,
      );
    }
    if (byHour) byHourRatios.push(byHour.pickup.p95 / ref.pickup.p95);
    const strict = summaries.at(-2)!;
    console.log(`     df-worker replayed in ${(dfMs / 1000).toFixed(1)} s`);
    p95Ratios.push(dfs.pickup.p95 / ref.pickup.p95);
    meanRatios.push(dfs.pickup.mean / ref.pickup.mean);
    const warmS = summaries[1]!;
    warmP95Ratios.push(warmS.pickup.p95 / ref.pickup.p95);
    warmMeanRatios.push(warmS.pickup.mean / ref.pickup.mean);
    const mostClaimed = Math.max(ref.claimed, strict.claimed);
    never.push(`${dfs.neverClaimed}/${Math.min(ref.neverClaimed, strict.neverClaimed)}`);
    // Cold and warm alike: neither may run out of the month or draw a 429.
    for (const run of [dfs, warmS]) {
      ranOut.push(run.exhaustedOnDay === null ? 'no' : `day ${run.exhaustedOnDay}`);
      rateLimited += run.rateLimited;
    }
    if (w.overload)
      console.log(
        `     claims: df-worker ${dfs.claimed}, warm ${warmS.claimed}, best fixed ${mostClaimed} (${dfs.claimed >= mostClaimed ? 'at least as many' : 'FEWER'})`,
      );
    if (draw === 1)
      await writeFile(join(values.out, `${w.name}.svg`), chart(w.name, pollers[0]!, best, bestRepoll));
  }
  console.log(
    `ratios over ${draws} draws: p95 ${range(p95Ratios)}, mean ${range(meanRatios)}; warm: p95 ${range(warmP95Ratios)}, mean ${range(warmMeanRatios)}` +
      (byHourRatios.length > 0 ? `; knowing the hours in hindsight: p95 ${range(byHourRatios)}` : '') +
      (firstWeekExtra.length > 0
        ? `; the cold start's first week polled ${Math.min(...firstWeekExtra)}–${Math.max(...firstWeekExtra)} more than the warm one's`
        : '') +
      (afterMove.cold.length > 0
        ? `; the new peaks' first day's p95 over the old peaks' week before: cold ${range(afterMove.cold)}, warm ${range(afterMove.warm)}`
        : ''),
  );
  readme.push(
    `| ${w.name} | ${range(p95Ratios)} | ${range(meanRatios)} | ${range(warmP95Ratios)} / ${range(warmMeanRatios)} | ${never.join(', ')} | ${[...new Set(ranOut)].join(', ')} | ${rateLimited} | ${range(byHourRatios)} |`,
  );
}
console.log(`\n${readme.join('\n')}`);
console.log(`\ncharts in ${values.out}/`);

function chart(name: string, df: ReplayResult, best: ReplayResult, bestRepoll: ReplayResult): string {
  const day = 86_400_000;
  const cumulative = (r: ReplayResult): [number, number][] => {
    const at = r.requests
      .filter((q) => q.status !== 429)
      .map((q) => q.at)
      .sort((a, b) => a - b);
    const points: [number, number][] = [];
    const step = Math.max(1, Math.floor(at.length / 300));
    for (let i = 0; i < at.length; i += step) points.push([(at[i]! - startsAt) / day, i + 1]);
    if (at.length > 0) points.push([(at.at(-1)! - startsAt) / day, at.length]);
    return points;
  };
  const days = (endsAt - startsAt) / day;
  const spend = lineChart({
    title: `${name}: cumulative requests`,
    xLabel: 'day of November 2026',
    yLabel: 'requests',
    series: [
      {
        name: 'even spend',
        color: '#999',
        dashed: true,
        points: [
          [0, 0],
          [days, PER_MONTH],
        ],
      },
      { name: best.name.replace(/^fixed/, 'best fixed'), color: '#e69f00', points: cumulative(best) },
      {
        name: bestRepoll.name.replace(/^fixed/, 'best fixed'),
        color: '#56b4e9',
        points: cumulative(bestRepoll),
      },
      { name: 'df-worker', color: '#d55e00', points: cumulative(df) },
    ],
  });
  const latency = lineChart({
    title: `${name}: p95 pickup by day (s, log scale)`,
    xLabel: 'day of November 2026',
    yLabel: 'p95 pickup, s',
    logY: true,
    yMin: 0.1,
    series: [
      {
        name: best.name.replace(/^fixed/, 'best fixed'),
        color: '#e69f00',
        points: pickupByDay(best).map((d) => [d.day, d.p95 / 1000]),
      },
      {
        name: bestRepoll.name.replace(/^fixed/, 'best fixed'),
        color: '#56b4e9',
        points: pickupByDay(bestRepoll).map((d) => [d.day, d.p95 / 1000]),
      },
      { name: 'df-worker', color: '#d55e00', points: pickupByDay(df).map((d) => [d.day, d.p95 / 1000]) },
    ],
  });
  // Two charts stacked in one file.
  const inner = (svg: string, y: number) =>
    svg.replace('<svg xmlns="http://www.w3.org/2000/svg"', `<svg y="${y}"`);
  return `<svg xmlns="http://www.w3.org/2000/svg" width="640" height="640" viewBox="0 0 640 640">\n${inner(spend, 0)}${inner(latency, 320)}</svg>\n`;
}
