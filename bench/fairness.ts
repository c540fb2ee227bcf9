// The rare task's pickup beside a flooded one, with the shared pool of before and with the fair share.
//   npm run bench:fairness [-- --hours 6 --seeds 5 --concurrency 2,4,8]
// Two tasks on one worker: `flood` always has work pending and each handler runs 30 s; `rare` gets Poisson
// arrivals (mean gap 5 min) of 50 ms executions. Both schedulers run the same code (src/scheduler/scheduler.ts)
// on the manual clock against the emulator in process, with the service's 5/s and 50/min limits (the month's
// budget set out of reach, so the month's pacing does not blur the comparison) and an idle poll cap of 10 s;
// only the Scheduler's `fairShare` option differs. No duration is shrunk: the clock is driven, so 6 hours of
// clock time take about a second.
import { parseArgs } from 'node:util';
import { quantile, runFairness, type FairnessResult } from '../test/scheduler/fairness-rig.ts';

const { values } = parseArgs({
  options: {
    hours: { type: 'string', default: '6' },
    seeds: { type: 'string', default: '5' },
    concurrency: { type: 'string', default: '2,4,8' },
  },
});
const hours = Number(values.hours);
const seeds = Number(values.seeds);
const concurrencies = values.concurrency.split(',').map(Number);
const s = (ms: number) => (ms / 1000).toFixed(1);

console.log(
  `flood: 30 s handlers, always pending; rare: 50 ms handlers, Poisson, mean gap 5 min; ${hours} h of clock ` +
    `time per run, seeds 1-${seeds} pooled`,
);
console.log(
  'DF_CONCURRENCY | scheduler        | rare arrivals | rare p50 s | rare p95 s | rare max s | flood done | flood slots | requests | wall ms',
);
for (const concurrency of concurrencies) {
  for (const fairShare of [false, true]) {
    const started = performance.now();
    const results: FairnessResult[] = [];
    for (let seed = 1; seed <= seeds; seed++) {
      results.push(
        await runFairness({
          fairShare,
          concurrency,
          durationMs: hours * 3_600_000,
          floodRunMs: 30_000,
          rareRunMs: 50,
          rareMeanGapMs: 300_000,
          maxPollIntervalMs: 10_000,
          seed,
        }),
      );
    }
    const pickups = results.flatMap((r) => r.rarePickupsMs);
    const arrivals = results.reduce((n, r) => n + r.rareArrivals, 0);
    const flood = results.reduce((n, r) => n + r.floodCompleted, 0);
    const floodSlots = Math.max(...results.map((r) => r.mostFloodRunning));
    const requests = results.reduce((n, r) => n + r.requests, 0);
    console.log(
      [
        String(concurrency).padEnd(14),
        (fairShare ? 'fair share (new)' : 'shared pool').padEnd(16),
        `${pickups.length}/${arrivals}`.padEnd(13),
        s(quantile(pickups, 0.5)).padEnd(10),
        s(quantile(pickups, 0.95)).padEnd(10),
        s(Math.max(...pickups)).padEnd(10),
        String(flood).padEnd(10),
        String(floodSlots).padEnd(11),
        String(requests).padEnd(8),
        (performance.now() - started).toFixed(0),
      ].join(' | '),
    );
  }
}
