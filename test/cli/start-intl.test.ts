// A daemon with the default settings never uses Intl. Its first use (toLocaleString, localeCompare, an
// Intl.DateTimeFormat) pages in the locale data built into Node and keeps it resident: measured on this
// machine's Node 24, a bare process at 41 MB RSS is at 49 MB after one `(40000).toLocaleString('en-US')` and
// at 44 MB after one `'a'.localeCompare('b')` (a module-level toLocaleString once cost the idle daemon 6 MB,
// bench:footprint 80 -> 87 MB). A preloaded recorder notes every use while a real daemon claims, runs,
// journals, replays and reports.
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Emulator } from '../../src/emulator/index.ts';
import { waitFor } from '../daemon/harness.ts';
import { runCli, type CliProcess } from './process.ts';

const KEY = 'intl-test-key-93b1';
const HANDLER = `import { defineTask } from 'df-worker';
export default defineTask({ key: 'double', handle: async (input) => ({ n2: Number(input.n) * 2 }) });
`;

/**
 * Preloaded (NODE_OPTIONS=--import) into the daemon: records each use of Intl (the first pages its locale data
 * in) with the caller's frame, and writes them to INTL_RECORD_FILE at exit.
 */
const RECORDER = `// Preloaded (NODE_OPTIONS=--import) into a df-worker process: records each first use of Intl, the one that
// pages its locale data in, with the caller's frame, and writes them to INTL_RECORD_FILE at exit.
import { writeFileSync } from 'node:fs';

const uses = [];
function record(name) {
  const frame = new Error().stack
    ?.split('\\n')
    .slice(3)
    .find((line) => !line.includes('intl-recorder'));
  uses.push({ name, at: frame?.trim() ?? '' });
}
for (const name of [
  'DateTimeFormat',
  'NumberFormat',
  'Collator',
  'PluralRules',
  'RelativeTimeFormat',
  'ListFormat',
  'Segmenter',
  'DisplayNames',
]) {
  const real = Intl[name];
  if (typeof real !== 'function') continue;
  Intl[name] = new Proxy(real, {
    construct: (target, args, newTarget) => (
      record(\`Intl.\${name}\`),
      Reflect.construct(target, args, newTarget)
    ),
    apply: (target, self, args) => (record(\`Intl.\${name}\`), Reflect.apply(target, self, args)),
  });
}
for (const [owner, label, names] of [
  [Number.prototype, 'Number', ['toLocaleString']],
  [BigInt.prototype, 'BigInt', ['toLocaleString']],
  [Array.prototype, 'Array', ['toLocaleString']],
  [Date.prototype, 'Date', ['toLocaleString', 'toLocaleDateString', 'toLocaleTimeString']],
  [String.prototype, 'String', ['localeCompare', 'toLocaleUpperCase', 'toLocaleLowerCase']],
]) {
  for (const name of names) {
    const real = owner[name];
    Object.defineProperty(owner, name, {
      configurable: true,
      writable: true,
      value: function (...args) {
        record(\`\${label}.prototype.\${name}\`);
        return real.apply(this, args);
      },
    });
  }
}
process.on('exit', () => writeFileSync(process.env.INTL_RECORD_FILE, JSON.stringify(uses)));
`;

let emulator: Emulator | undefined;
let dir: string | undefined;
let cli: CliProcess | undefined;
afterEach(async () => {
  if (cli && cli.child.exitCode === null) cli.child.kill('SIGKILL');
  cli = undefined;
  await emulator?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** Runs a daemon on `settings` until it has reported `count` executions, stopped twice; returns Intl's uses. */
async function intlUses(
  settings: Record<string, string>,
  count: number,
): Promise<{ name: string; at: string }[]> {
  emulator = new Emulator({ apiKeys: [KEY] });
  await emulator.listen();
  dir = await mkdtemp(join(tmpdir(), 'df-worker-intl-'));
  await mkdir(join(dir, 'handlers'));
  await writeFile(join(dir, 'handlers', 'double.ts'), HANDLER);
  emulator.createTask({ key: 'double', inputKeys: [{ key: 'n', description: '' }] });
  const record = join(dir, 'intl.json');
  const recorder = join(dir, 'intl-recorder.mjs');
  await writeFile(recorder, RECORDER);
  const env = {
    DF_API_URL: emulator.url,
    DF_API_KEY: KEY,
    DF_HANDLERS_DIR: join(dir, 'handlers'),
    DF_STATE_DIR: join(dir, 'state'),
    DF_HTTP_PORT: '0',
    DF_HTTP_HOST: '127.0.0.1',
    DF_LOG_LEVEL: 'info',
    NODE_OPTIONS: `--import=${recorder}`,
    INTL_RECORD_FILE: record,
    ...settings,
  };
  const uses: { name: string; at: string }[] = [];
  // Two starts: the second reads the state folder the first wrote (budget, journal, profile, lock).
  for (const start of [1, 2]) {
    for (let n = 0; n < count; n++) emulator.enqueueExecution('double', { n: start * 10 + n });
    cli = runCli(['start'], env);
    const reported = () => emulator!.executions().filter((e) => e.reports.length > 0).length;
    await waitFor(() => reported() === start * count, `${start * count} executions reported`, 20_000);
    cli.child.kill('SIGTERM');
    expect((await cli.exited).code).toBe(0);
    uses.push(...(JSON.parse(await readFile(record, 'utf8')) as { name: string; at: string }[]));
  }
  return uses;
}

describe('a daemon on the default settings', () => {
  it('never uses Intl, so its locale data never becomes resident', async () => {
    expect(await intlUses({}, 3)).toEqual([]);
  }, 60_000);

  it('is watched by a recorder that sees Intl where a setting asks for it (the check itself)', async () => {
    // A month that resets in Paris needs the time zone's rules: Intl, on purpose.
    const uses = await intlUses({ DF_BUDGET_TIME_ZONE: 'Europe/Paris' }, 1);
    expect(uses.map((u) => u.name)).toContain('Intl.DateTimeFormat');
    expect(uses.some((u) => u.at.includes('budget/month.ts'))).toBe(true);
  }, 60_000);
});
