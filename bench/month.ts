// The month replay: df-worker's own scheduling code against a month of arrivals, in virtual time.
//   npm run bench:month -- --arrivals FILE.jsonl [--month 2026-11] [--time-zone UTC] [--handler-ms N]
//                          [--concurrency N] [--out DIR]
//   npm run bench:month -- --jobs FILE.json [--json]         (a chained month in the service's terms)
//   npm run bench:month -- --chained NAME [--seed 7] [--json] (a built-in chained month; see month-chained.ts)
// DF_* settings in the environment apply as they do to the daemon. Writes claims.jsonl and requests.jsonl
// to --out (default bench/out/) and prints the summary.
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { replayMonth } from '../src/replay/replay.ts';
import { busiestWindow, formatSummary, summarize } from '../src/replay/summary.ts';
import { CHAINED_WORKLOADS, chainedWorkload, readJobsFile } from '../src/replay/jobs.ts';
import { readArrivals } from '../src/replay/workloads.ts';
import { compareChained, printChained } from './month-chained.ts';

const { values } = parseArgs({
  options: {
    arrivals: { type: 'string' },
    month: { type: 'string', default: '2026-11' },
    'time-zone': { type: 'string' },
    'handler-ms': { type: 'string', default: '0' },
    concurrency: { type: 'string' },
    out: { type: 'string', default: 'bench/out' },
    jobs: { type: 'string' },
    chained: { type: 'string' },
    seed: { type: 'string', default: '7' },
    json: { type: 'boolean', default: false },
  },
});
if (values.jobs !== undefined || values.chained !== undefined) {
  const builtIn = CHAINED_WORKLOADS.find((w) => w.name === values.chained);
  if (values.chained !== undefined && !builtIn) {
    console.error(
      `no chained workload '${values.chained}'; known: ${CHAINED_WORKLOADS.map((w) => w.name).join(', ')}`,
    );
    process.exit(2);
  }
  const file = builtIn
    ? chainedWorkload(Number(values.seed), { ...builtIn.options, month: values.month })
    : await readJobsFile(values.jobs!);
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => k.startsWith('DF_')));
  printChained(await compareChained(file, values.month, env), values.json);
  process.exit(0);
}
if (!values.arrivals) {
  console.error('usage: npm run bench:month -- --arrivals FILE.jsonl [--month YYYY-MM] [--out DIR] ...');
  process.exit(2);
}
const arrivals = await readArrivals(values.arrivals);
const started = performance.now();
const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => k.startsWith('DF_')));
const result = await replayMonth({
  arrivals,
  month: values.month,
  ...(values['time-zone'] === undefined ? {} : { timeZone: values['time-zone'] }),
  handlerMs: Number(values['handler-ms']),
  ...(values.concurrency === undefined ? {} : { concurrency: Number(values.concurrency) }),
  env,
});
const elapsedMs = performance.now() - started;
await mkdir(values.out, { recursive: true });
const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());
await writeFile(
  join(values.out, 'claims.jsonl'),
  result.claims
    .map((c) =>
      JSON.stringify({
        task: c.task,
        arrivedAt: iso(c.arrivedAt),
        claimedAt: iso(c.claimedAt),
        reportedAt: iso(c.reportedAt),
      }),
    )
    .join('\n') + '\n',
);
await writeFile(
  join(values.out, 'requests.jsonl'),
  result.requests
    .map((r) =>
      JSON.stringify({ at: iso(r.at), kind: r.kind, ...(r.task ? { task: r.task } : {}), status: r.status }),
    )
    .join('\n') + '\n',
);
const summary = summarize(result);
console.log(formatSummary(summary));
console.log(
  `  busiest second ${busiestWindow(result, 1_000)} requests, busiest minute ${busiestWindow(result, 60_000)}; ` +
    `last poll ${summary.lastPollAt === null ? 'never' : iso(summary.lastPollAt)}`,
);
console.log(
  `replayed ${arrivals.length} arrivals in ${(elapsedMs / 1000).toFixed(1)} s; wrote ${values.out}/claims.jsonl, requests.jsonl`,
);
