// The running daemon's read-only status page (DF_HTTP_STATUS_PAGE) on its health and metrics port: a real
// `df-worker start` against the emulator on loopback.
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Emulator } from '../../src/emulator/index.ts';
import { waitFor } from '../daemon/harness.ts';
import { runCli, type CliProcess } from '../cli/process.ts';

const KEY = 'status-page-key';
let emulator: Emulator;
let dir: string;
let cli: CliProcess | undefined;

beforeEach(async () => {
  emulator = new Emulator({ apiKeys: [KEY] });
  await emulator.listen();
  dir = await mkdtemp(join(tmpdir(), 'df-worker-status-'));
  await mkdir(join(dir, 'handlers'));
  await writeFile(
    join(dir, 'handlers/greet.ts'),
    `export default { key: 'greet', inputKeys: ['name'], outputKeys: ['text'],
  handle: (input: { name: string }) => ({ text: 'hello ' + input.name }) };\n`,
  );
  emulator.createTask({ key: 'greet', inputKeys: [{ key: 'name', description: '' }] });
});

afterEach(async () => {
  if (cli && cli.child.exitCode === null) {
    cli.child.kill('SIGTERM');
    await cli.exited;
  }
  cli = undefined;
  await emulator.close();
  await rm(dir, { recursive: true, force: true });
});

/** Starts the daemon; resolves its health server's URL once it serves. */
async function start(extra: Record<string, string>): Promise<string> {
  cli = runCli(['start'], {
    DF_API_URL: emulator.url,
    DF_API_KEY: KEY,
    DF_HANDLERS_DIR: join(dir, 'handlers'),
    DF_STATE_DIR: join(dir, 'state'),
    DF_HTTP_PORT: '0',
    DF_HTTP_HOST: '127.0.0.1',
    DF_LOG_LEVEL: 'info',
    ...extra,
  });
  const running = cli;
  let url: string | undefined;
  await waitFor(
    () => {
      url = running.logs().find((line) => line.msg === 'serving /metrics, /healthz and /readyz')
        ?.url as string;
      return url !== undefined || running.child.exitCode !== null;
    },
    'the health server',
    20_000,
  );
  if (url === undefined) throw new Error(`the daemon did not start: ${running.stdout()}${running.stderr()}`);
  return url;
}

describe('the status page of df-worker start', () => {
  it('shows readiness, budget and each execution with its attempts, but never its input or output', async () => {
    const execution = emulator.enqueueExecution('greet', { name: 'private-name-4711' });
    const url = await start({ DF_HTTP_STATUS_PAGE: 'true' });
    await waitFor(() => (emulator.execution(execution.id)?.reports.length ?? 0) > 0, 'the report', 20_000);
    const answer = await fetch(`${url}/status`);
    expect(answer.status).toBe(200);
    expect(answer.headers.get('content-type')).toBe('text/html; charset=utf-8');
    const page = await answer.text();
    expect(page).toContain(`data-execution="${execution.id}"`);
    expect(page).toMatch(/data-attempt="1"\s+data-result="returned"/);
    expect(page).toContain('tasks served');
    expect(page).toContain('class="even-pace"');
    expect(page).not.toContain('private-name-4711');
    expect(page).not.toContain('<form');
  });

  it('is off by default: /status answers 404 and names the setting', async () => {
    const url = await start({});
    const answer = await fetch(`${url}/status`);
    expect(answer.status).toBe(404);
    expect(await answer.text()).toContain('DF_HTTP_STATUS_PAGE=true');
  });
});
