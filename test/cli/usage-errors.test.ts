// `start`, `demo` and `emulator` refuse a command line they cannot understand with exit 2 and a pointer to their
// help, as the other commands do; the emulator's limits accept 0, which turns that limit off.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { commands } from '../../src/cli/commands/index.ts';
import { EXIT_USAGE } from '../../src/errors/exit-codes.ts';
import { waitFor } from '../daemon/harness.ts';
import { captureOutput, cli, REPO_ROOT } from './run-cli.ts';

function run(name: string, argv: string[]) {
  return captureOutput(() => commands.get(name)!.run(argv));
}

describe('usage errors of start, demo and emulator', () => {
  it.each(['start', 'demo', 'emulator'])(
    '%s exits 2 on an unknown option, pointing at its help',
    async (name) => {
      const result = await run(name, ['--bogus']);
      expect(result.code).toBe(EXIT_USAGE);
      expect(result.stderr).toMatch(new RegExp(`^df-worker ${name}: Unknown option '--bogus'`));
      expect(result.stderr).toContain(`Run \`npm run cli -- ${name} --help\` for the options.`);
      expect(result.stdout).toBe('');
    },
  );

  it.each(['start', 'demo', 'emulator'])('%s exits 2 on an unexpected argument', async (name) => {
    const result = await run(name, ['extra']);
    expect(result.code).toBe(EXIT_USAGE);
    expect(result.stderr).toMatch(new RegExp(`^df-worker ${name}: Unexpected argument 'extra'`));
  });

  it('exits 2 from the real process for `start --bogus`, before reading any configuration', async () => {
    const result = await cli(['start', '--bogus']);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/^df-worker start: Unknown option '--bogus'/);
  });

  it.each([
    ['demo', ['--executions=-1'], '--executions must be a whole number >= 0, got "-1"'],
    ['demo', ['--executions', ''], '--executions must be a whole number >= 0, got ""'],
    ['demo', ['--interval-ms', '1.5'], '--interval-ms must be a whole number >= 0, got "1.5"'],
    ['emulator', ['--port', '70000'], '--port must be a whole number from 0 to 65535, got "70000"'],
    ['emulator', ['--port', 'http'], '--port must be a whole number from 0 to 65535, got "http"'],
    [
      'emulator',
      ['--per-second', 'five'],
      '--per-second must be a whole number >= 0 (0: no limit), got "five"',
    ],
    ['emulator', ['--per-month=-3'], '--per-month must be a whole number >= 0 (0: no limit), got "-3"'],
  ])('%s %j exits 2 naming the option and the value', async (name, argv, message) => {
    const result = await run(name, argv);
    expect(result.code).toBe(EXIT_USAGE);
    expect(result.stderr).toBe(
      `df-worker ${name}: ${message}\nRun \`npm run cli -- ${name} --help\` for the options.\n`,
    );
  });

  it('documents in the emulator help that 0 turns a limit off', async () => {
    const result = await run('emulator', ['--help']);
    expect(result.code).toBe(0);
    for (const flag of ['per-second', 'per-minute', 'per-month']) {
      expect(result.stdout).toMatch(new RegExp(`--${flag} N .*0 = no limit`));
    }
  });
});

describe('df-worker emulator --per-second 0', () => {
  it('accepts 0 as no per-second limit while still enforcing the per-minute one', async () => {
    const child = spawn(
      process.execPath,
      [
        '--conditions=df-worker-source',
        path.join(REPO_ROOT, 'src/cli/main.ts'),
        'emulator',
        ...['--port', '0', '--key', 'k-usage', '--per-second', '0', '--per-minute', '7'],
      ],
      { env: { PATH: process.env.PATH ?? '' }, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let stdout = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    const exited = new Promise<number | null>((resolve) => child.once('close', resolve));
    try {
      await waitFor(() => /listening on (\S+)/.test(stdout), 'the emulator to listen', 15_000);
      const url = /listening on (\S+)/.exec(stdout)![1]!;
      const statuses: number[] = [];
      for (let i = 0; i < 8; i++) {
        const response = await fetch(`${url}/v1/data-factory/tasks`, { headers: { 'X-Api-Key': 'k-usage' } });
        await response.arrayBuffer();
        statuses.push(response.status);
      }
      expect(statuses).toEqual([200, 200, 200, 200, 200, 200, 200, 429]);
    } finally {
      child.kill('SIGTERM');
    }
    expect(await exited).toBe(0);
  });
});
