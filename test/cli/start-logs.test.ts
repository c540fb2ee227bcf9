// What `df-worker start` writes to stdout: readable lines on a terminal or with DF_LOG_PRETTY=true, JSON lines
// otherwise (containers, pipes) or with DF_LOG_PRETTY=false, and an expected NonRetryableError without a stack.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { cliCommand } from '../../src/cli/invocation.ts';
import { Emulator } from '../../src/emulator/index.ts';
import { waitFor } from '../daemon/harness.ts';
import { REPO_ROOT, runCli, type CliProcess } from './process.ts';

const KEY = 'start-logs-key-51c2';
let emulator: Emulator;
let dir: string;
let cli: CliProcess | undefined;

beforeEach(async () => {
  emulator = new Emulator({ apiKeys: [KEY] });
  await emulator.listen();
  dir = await mkdtemp(join(tmpdir(), 'df-worker-start-logs-'));
  await mkdir(join(dir, 'handlers'));
  await writeFile(join(dir, 'handlers', 'pricing.ts'), REFUSING_HANDLER);
});

afterEach(async () => {
  if (cli && cli.child.exitCode === null) cli.child.kill('SIGKILL');
  cli = undefined;
  await emulator.close();
  await rm(dir, { recursive: true, force: true });
});

const REFUSING_HANDLER = `
import { defineTask, NonRetryableError } from 'df-worker';
export default defineTask({
  key: 'pricing',
  retryCount: 3,
  handle: () => {
    throw new NonRetryableError('unknown currency "XYZ"');
  },
});
`;

function env(extra: Record<string, string> = {}): Record<string, string> {
  return {
    DF_API_URL: emulator.url,
    DF_API_KEY: KEY,
    DF_HANDLERS_DIR: join(dir, 'handlers'),
    DF_STATE_DIR: join(dir, 'state'),
    DF_HTTP_PORT: '0',
    DF_TASK_SYNC: 'true',
    ...extra,
  };
}

describe('df-worker start logs', () => {
  it('are JSON lines on a pipe by default, and a NonRetryableError is logged without a stack', async () => {
    emulator.createTask({ key: 'pricing' });
    emulator.enqueueExecution('pricing', {});
    cli = runCli(['start'], env());
    await waitFor(() => emulator.executions()[0]?.reports.length === 1, 'the report', 15_000);
    cli.child.kill('SIGTERM');
    expect((await cli.exited).code).toBe(0);
    const failed = cli.logs().filter((line) => line.msg === 'attempt failed; not retrying');
    expect(failed).toEqual([
      expect.objectContaining({ level: 40, error: 'unknown currency "XYZ"', errorName: 'NonRetryableError' }),
    ]);
    expect(cli.stdout()).not.toMatch(/"stack"|\n\s+at /);
  });

  it('are readable lines with DF_LOG_PRETTY=true, one per event, no stack for a NonRetryableError', async () => {
    emulator.createTask({ key: 'pricing' });
    emulator.enqueueExecution('pricing', {});
    cli = runCli(['start'], env({ DF_LOG_PRETTY: 'true' }));
    await waitFor(() => emulator.executions()[0]?.reports.length === 1, 'the report', 15_000);
    cli.child.kill('SIGTERM');
    expect((await cli.exited).code).toBe(0);
    const lines = cli.stdout().trimEnd().split('\n');
    expect(lines.every((line) => /^\[\d{2}:\d{2}:\d{2}\.\d{3}\] (INFO|WARN|DEBUG): /.test(line))).toBe(true);
    expect(lines).toContainEqual(expect.stringMatching(/\] INFO: df-worker started \{"tasks":\["pricing"\]/));
    expect(lines).toContainEqual(
      expect.stringMatching(
        /\] WARN: attempt failed; not retrying \{.*"error":"unknown currency \\"XYZ\\"","errorName":"NonRetryableError"/,
      ),
    );
    expect(cli.stdout()).not.toContain('"stack"');
  });

  it('name a DF_* variable that is no setting, with the setting it was meant to be, and start anyway', async () => {
    emulator.createTask({ key: 'pricing' });
    cli = runCli(['start'], env({ DF_API_KYE: KEY, DF_HANDLER_TIMOUT_MS: '100', DF_FEATURE_FLAGS: 'x' }));
    await waitFor(() => cli!.logs().some((line) => line.msg === 'df-worker started'), 'the start', 15_000);
    cli.child.kill('SIGTERM');
    expect((await cli.exited).code).toBe(0);
    const unknown = cli.logs().filter((line) => line.code === 'DFW_CONFIG_UNKNOWN_SETTING');
    expect(unknown).toEqual([
      expect.objectContaining({
        level: 40,
        variable: 'DF_API_KYE',
        suggestion: 'DF_API_KEY',
        msg: 'DF_API_KYE is not a df-worker setting; did you mean DF_API_KEY?',
      }),
      expect.objectContaining({ level: 40, variable: 'DF_FEATURE_FLAGS' }),
      expect.objectContaining({
        level: 40,
        msg: 'DF_HANDLER_TIMOUT_MS is not a df-worker setting; did you mean DF_HANDLER_TIMEOUT_MS?',
      }),
    ]);
    expect(cli.stdout()).not.toContain(KEY);
  });

  it('name `tasks sync` and the nearest task key for a handler whose task is not on the service', async () => {
    emulator.createTask({ key: 'pricnig' });
    cli = runCli(['start'], env({ DF_TASK_SYNC: 'false' }));
    const missing = () => cli!.logs().find((line) => line.taskKey === 'pricing' && line.level === 40);
    await waitFor(() => missing() !== undefined, 'the warning', 15_000);
    cli.child.kill('SIGTERM');
    expect((await cli.exited).code).toBe(0);
    expect(missing()).toMatchObject({
      file: join(dir, 'handlers', 'pricing.ts'),
      nearestTaskKey: 'pricnig',
      msg:
        "a handler has no task on the service (did you mean pricnig? then correct the handler's key); create its " +
        `task with \`${cliCommand('tasks sync')}\` or start with DF_TASK_SYNC=true`,
    });
  });

  const script = '/usr/bin/script';
  it.skipIf(!existsSync(script))(
    'are readable on a terminal by default, and JSON there with DF_LOG_PRETTY=false',
    async () => {
      // A refused key makes start log one fatal line and exit: enough to see the format on a pseudo-terminal.
      const onTerminal = (extra: Record<string, string>) =>
        runOnTerminal(script, env({ DF_API_KEY: 'not-the-key', ...extra }));
      const auto = await onTerminal({});
      expect(auto).toMatch(/\] FATAL: df-worker could not start: .*refused the API key/);
      expect(auto).not.toContain('{"level"');
      const forced = await onTerminal({ DF_LOG_PRETTY: 'false' });
      expect(forced).toMatch(/\{"level":60,.*"msg":"df-worker could not start: /);
    },
  );
});

/** Runs `df-worker start` on a pseudo-terminal (util-linux `script`), resolving with all it printed. */
function runOnTerminal(script: string, env: Record<string, string>): Promise<string> {
  const quote = (text: string) => `'${text.replaceAll("'", `'\\''`)}'`;
  const command = [process.execPath, '--conditions=df-worker-source', `${REPO_ROOT}src/cli/main.ts`, 'start']
    .map(quote)
    .join(' ');
  const child = spawn(script, ['-q', '-e', '-c', command, '/dev/null'], {
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '/tmp',
      TERM: 'dumb',
      NO_COLOR: '1',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let text = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('close', () => resolve(text.replaceAll('\r\n', '\n')));
  });
}
