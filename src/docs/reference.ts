// Reference tables generated from the single sources of truth (the configuration schema, the metrics registry, the
// error catalogue), and the measured figures the guides quote (bench/figures.json), so the guides cannot drift from
// the code or from one another: `npm run docs` rewrites them, a test fails when they differ.
import { describeConfig } from '../config/describe.ts';
import { ERROR_CATALOGUE } from '../errors/catalogue.ts';
import { EXIT_CODES } from '../errors/exit-codes.ts';
import { WorkerMetrics } from '../telemetry/metrics.ts';
import { renderFigures } from './figures.ts';

export const CONFIG_MARKERS = ['<!-- config-table:start -->', '<!-- config-table:end -->'] as const;
export const METRICS_MARKERS = ['<!-- metrics-table:start -->', '<!-- metrics-table:end -->'] as const;
export const ERROR_CODES_MARKERS = [
  '<!-- error-codes-table:start -->',
  '<!-- error-codes-table:end -->',
] as const;

function cell(text: string): string {
  return text.replaceAll('|', '\\|').replaceAll('\n', ' ');
}

export function configTable(): string {
  const rows = describeConfig().map((s) => `| \`${s.env}\` | \`${s.setting}\` | ${cell(s.doc)} |`);
  return ['| Variable | Setting | Meaning |', '|---|---|---|', ...rows].join('\n');
}

export function metricsTable(): string {
  const metrics = new WorkerMetrics({ defaultMetrics: false });
  // The metric objects, not getMetricsAsJSON(): only the objects carry their label names.
  const list = metrics.registry.getMetricsAsArray() as unknown as {
    name: string;
    type: string;
    help: string;
    labelNames: readonly string[];
  }[];
  const rows = list.map((m) => {
    const names = m.labelNames.map((l) => `\`${l}\``).join(', ');
    return `| \`${m.name}\` | ${m.type} | ${names} | ${cell(m.help)} |`;
  });
  return ['| Metric | Type | Labels | Meaning |', '|---|---|---|---|', ...rows].join('\n');
}

export function errorCodesTable(): string {
  const rows = Object.entries(ERROR_CATALOGUE).map(([code, entry]) => {
    const classes = entry.errors.map((name) => `\`${name}\``).join(', ');
    return `| \`${code}\` | ${cell(entry.meaning)} | ${classes} |`;
  });
  return ['| Code | Meaning | Error class |', '|---|---|---|', ...rows].join('\n');
}

export const EXIT_CODES_MARKERS = [
  '<!-- exit-codes-table:start -->',
  '<!-- exit-codes-table:end -->',
] as const;

export function exitCodesTable(): string {
  const rows = Object.entries(EXIT_CODES).map(
    ([name, entry]) => `| ${entry.code} | \`${name}\` | ${cell(entry.meaning)} |`,
  );
  return ['| Exit code | Name | Meaning |', '|---|---|---|', ...rows].join('\n');
}

/** Replaces the text between two markers; throws when the markers are missing. */
export function replaceBetween(text: string, markers: readonly [string, string], content: string): string {
  const start = text.indexOf(markers[0]);
  const end = text.indexOf(markers[1]);
  if (start < 0 || end < start) throw new Error(`markers ${markers[0]} ... ${markers[1]} not found`);
  return `${text.slice(0, start + markers[0].length)}\n${content}\n${text.slice(end)}`;
}

/** A guide with generated tables or figures, by its path from the repository root, and how to bring them up to date. */
export interface GeneratedDoc {
  path: string;
  render(text: string): string;
}

const tables = (markers: readonly [string, string], table: () => string) => (text: string) =>
  replaceBetween(text, markers, table());

// Each guide wraps its table markers in `<!-- prettier-ignore-start -->` ... `<!-- prettier-ignore-end -->`:
// Prettier would pad every row of these wide tables to the longest one. Figure blocks sit inline, in any guide.
export const GENERATED_DOCS: readonly GeneratedDoc[] = [
  { path: 'README.md' },
  { path: 'config/README.md', table: tables(CONFIG_MARKERS, configTable) },
  { path: 'handlers/README.md' },
  { path: 'helm/README.md', table: tables(METRICS_MARKERS, metricsTable) },
  { path: 'helm/CLUSTERING.md' },
  { path: '.github/CONTRIBUTING.md' },
  {
    path: 'src/errors/README.md',
    table: (text: string) =>
      tables(EXIT_CODES_MARKERS, exitCodesTable)(tables(ERROR_CODES_MARKERS, errorCodesTable)(text)),
  },
].map(({ path, table }: { path: string; table?: (text: string) => string }) => ({
  path,
  render: (text: string) => renderFigures(table === undefined ? text : table(text)),
}));
