// Issue 5's fault-injection figures: runs every scenario of test/faults/scenarios.ts (the real
// `df-worker start` against the emulator on loopback) and prints one table row per scenario.
// The service outage lasts 20 s here, as the issue asks (the test suite uses 3 s).
//   ./node_modules/.bin/node bench/faults-report.ts [--outage-ms 20000] [--only 6]
import { parseArgs } from 'node:util';
import { SCENARIOS } from '../test/faults/scenarios.ts';

const { values } = parseArgs({
  options: {
    'outage-ms': { type: 'string', default: '20000' },
    only: { type: 'string', multiple: true },
  },
});
const outageMs = Number(values['outage-ms']);
const only = new Set(values.only ?? []);

const COLUMNS = ['scenario', 'claimed', 'reported', 'duplicated', 'lost'] as const;
const rows: string[][] = [];
const remarks: string[] = [];
const details: string[] = [];
for (const scenario of SCENARIOS) {
  const number = scenario.name.split(' ')[0]!;
  if (only.size > 0 && !only.has(number)) continue;
  process.stderr.write(`running ${scenario.name}...\n`);
  const started = Date.now();
  let result: Awaited<ReturnType<(typeof SCENARIOS)[number]['run']>>;
  try {
    result = await scenario.run({ outageMs });
  } catch (error) {
    rows.push([scenario.name, '-', '-', '-', '-']);
    remarks.push(`${number}: did not complete: ${(error as Error).message}`);
    continue;
  }
  const { claimed, reported, duplicated, lost } = result.figures;
  rows.push([scenario.name, String(claimed), String(reported), String(duplicated), String(lost)]);
  details.push(`${number}: ${result.detail}`);
  if (result.tally.wrong > 0) remarks.push(`${number}: ${result.tally.wrong} report(s) with a wrong output`);
  process.stderr.write(`  done in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
}

const widths = COLUMNS.map((c, i) => Math.max(c.length, ...rows.map((r) => r[i]!.length)));
const line = (cells: readonly string[]) =>
  `| ${cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join(' | ')} |`;
console.log(line(COLUMNS));
console.log(
  `|${widths.map((w, i) => (i === 0 ? `${'-'.repeat(w + 1)}-` : `${'-'.repeat(w + 1)}:`)).join('|')}|`,
);
for (const row of rows) console.log(line(row));
console.log('');
for (const detail of details) console.log(detail);
console.log('');
for (const remark of remarks) console.log(remark);
if (remarks.length === 0)
  console.log('Every report of the workload carried the output its input determines.');
else process.exitCode = 1;
