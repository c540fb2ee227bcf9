// `df-worker start` as users run it: a real process, real signals, the emulator on loopback.
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { Emulator } from '../../src/emulator/index.ts';
import { waitFor } from '../daemon/harness.ts';
import { runCli, type CliProcess } from './process.ts';

const KEY = 'start-test-key-7f3a';
let emulator: Emulator;
let dir: string;
let cli: CliProcess | undefined;

beforeEach(async () => {
  emulator = new Emulator({ apiKeys: [KEY] });
  await emulator.listen();
  dir = await mkdtemp(join(tmpdir(), 'df-worker-start-'));
});

afterEach(async () => {
  if (cli && cli.child.exitCode === null) cli.child.kill('SIGKILL');
  cli = undefined;
  await emulator.close();
  await rm(dir, { recursive: true, force: true });
});

function env(extra: Record<string, string> = {}): Record<string, string> {
  return {
    DF_API_URL: emulator.url,
    DF_API_KEY: KEY,
    DF_HANDLERS_DIR: join(dir, 'handlers'),
    DF_STATE_DIR: join(dir, 'state'),
    DF_HTTP_PORT: '0',
    DF_HTTP_HOST: '127.0.0.1',
    DF_LOG_LEVEL: 'info',
    DF_RETRY_BASE_MS: '20',
    ...extra,
  };
}

const SLOW_HANDLER = `
import { defineTask } from 'df-worker';
export default defineTask({
  key: 'slow',
  inputKeys: ['ms'],
  outputKeys: ['slept'],
  handle: (input: { ms: number }, ctx) =>
    new Promise((resolve, reject) => {
      const timer = setTimeout(() => resolve({ slept: input.ms }), input.ms);
      ctx.signal.addEventListener('abort', () => { clearTimeout(timer); reject(new Error('aborted')); });
    }),
});
`;

async function writeHandlers(files: Record<string, string>): Promise<void> {
  const { mkdir } = await import('node:fs/promises');
  await mkdir(join(dir, 'handlers'), { recursive: true });
  for (const [name, text] of Object.entries(files)) await writeFile(join(dir, 'handlers', name), text);
}

describe('df-worker start', () => {
  it('drains on SIGTERM: a running handler finishes within the grace period, is reported, exit 0', async () => {
    await writeHandlers({ 'slow.ts': SLOW_HANDLER });
    emulator.createTask({ key: 'slow', inputKeys: [{ key: 'ms', description: '' }] });
    const execution = emulator.enqueueExecution('slow', { ms: 800 });
    cli = runCli(['start'], env({ DF_SHUTDOWN_GRACE_MS: '5000' }));
    await waitFor(() => emulator.executions()[0]?.claimedAt !== undefined, 'the claim', 15_000);
    cli.child.kill('SIGTERM');
    const { code } = await cli.exited;
    expect(code).toBe(0);
    const [done] = emulator.executions().filter((e) => e.id === execution.id);
    expect(done?.reports).toEqual([expect.objectContaining({ status: 'COMPLETED', output: { slept: 800 } })]);
    // Nothing was polled after the signal. The emulator stamps a request when it arrives: the re-poll that
    // follows the claim may leave just before the signal and arrive after it on two loaded cores (a CI run
    // saw one arrive more than 5 ms after the log line), so arrivals within 100 ms of it are not counted.
    const signalled = cli.logs().find((l) => l.msg === 'signal received: draining')!;
    const signalAt = Date.parse(signalled.time as string);
    expect(emulator.requests().filter((r) => r.operation === 'tasks.poll' && r.at > signalAt + 100)).toEqual(
      [],
    );
  });

  it('aborts a handler still running when the grace period ends, reports it FAILED and exits 0', async () => {
    await writeHandlers({ 'slow.ts': SLOW_HANDLER });
    emulator.createTask({ key: 'slow', inputKeys: [{ key: 'ms', description: '' }] });
    emulator.enqueueExecution('slow', { ms: 60_000 });
    cli = runCli(['start'], env({ DF_SHUTDOWN_GRACE_MS: '300' }));
    await waitFor(() => emulator.executions()[0]?.claimedAt !== undefined, 'the claim', 15_000);
    const before = Date.now();
    cli.child.kill('SIGTERM');
    const { code } = await cli.exited;
    expect(code).toBe(0);
    expect(Date.now() - before).toBeLessThan(10_000);
    expect(emulator.executions()[0]?.reports).toEqual([
      expect.objectContaining({
        status: 'FAILED',
        output: expect.objectContaining({ error: expect.stringMatching(/shut down/) as unknown }) as unknown,
      }),
    ]);
  });

  it('exits 0 on SIGTERM while it still retries its first task list (the service answering 503)', async () => {
    await writeHandlers({ 'slow.ts': SLOW_HANDLER });
    emulator.setFaults([{ operation: 'tasks.list', kind: 'status', status: 503 }]);
    cli = runCli(['start'], env());
    await waitFor(
      () => cli!.logs().some((l) => l.msg === 'could not list the service tasks yet; retrying'),
      'a failed task list',
      15_000,
    );
    cli.child.kill('SIGTERM');
    const { code } = await cli.exited;
    expect(code).toBe(0);
    expect(cli.stderr()).toBe('');
    expect(cli.logs().at(-1)?.msg).toBe('df-worker stopped');
  });

  it('refuses bad configuration, naming every bad setting and never printing the key', async () => {
    cli = runCli(['start'], {
      DF_API_KEY: KEY,
      DF_CONCURRENCY: '0',
      DF_BUDGET_PER_MINUTE: 'lots',
      DF_HANDLERS_DIR: join(dir, 'handlers'),
    });
    const { code } = await cli.exited;
    expect(code).toBe(78);
    const stderr = cli.stderr();
    expect(stderr).toMatch(/DF_CONCURRENCY/);
    expect(stderr).toMatch(/DF_BUDGET_PER_MINUTE/);
    expect(stderr).toMatch(/DF_API_URL/);
    expect(stderr + cli.stdout()).not.toContain(KEY);
  });

  it('names a misspelt variable beside the setting it leaves missing, never printing the key', async () => {
    cli = runCli(['start'], {
      DF_API_URL: emulator.url,
      DF_API_KYE: KEY,
      DF_HANDLERS_DIR: join(dir, 'handlers'),
    });
    const { code } = await cli.exited;
    expect(code).toBe(78);
    expect(cli.stderr()).toMatch(/^df-worker: error DFW_CONFIG_INVALID: .*\nDF_API_KEY \(api\.key\): /m);
    expect(cli.stderr()).toContain(
      'df-worker: warning DFW_CONFIG_UNKNOWN_SETTING: DF_API_KYE is not a df-worker setting; did you mean DF_API_KEY?\n',
    );
    expect(cli.stderr() + cli.stdout()).not.toContain(KEY);
  });

  it('refuses to start with a broken handler file, naming the file', async () => {
    await writeHandlers({
      'good.ts': `import { defineTask } from 'df-worker';\nexport default defineTask({ key: 'good', handle: () => ({}) });\n`,
      'broken.ts': `import { defineTask } from 'df-worker';\nexport default defineTask({ key: 'broken', handle: () => ({ }) ;\n`,
    });
    cli = runCli(['start'], env());
    const { code } = await cli.exited;
    expect(code).toBe(1);
    expect(cli.stderr()).toMatch(/broken\.ts/);
  });

  // The handler modules begin loading before the daemon's own modules do (commands/start.ts): a folder that
  // fails at once fails start as it always did, not as a rejection nobody handled yet (exit 70).
  it('refuses to start on a missing handlers folder, naming it, and logs each handler it loads', async () => {
    cli = runCli(['start'], env({ DF_HANDLERS_DIR: join(dir, 'nowhere') }));
    const { code } = await cli.exited;
    expect(code).toBe(1);
    expect(cli.stderr()).toMatch(
      /^df-worker: error DFW_HANDLERS_DIR: could not start: .*nowhere.* does not exist/m,
    );
    expect(cli.stderr()).not.toMatch(/unhandled rejection|uncaught exception/);

    await writeHandlers({ 'slow.ts': SLOW_HANDLER });
    emulator.createTask({ key: 'slow', inputKeys: [{ key: 'ms', description: '' }], outputKeys: [] });
    cli = runCli(['start'], env());
    await waitFor(() => emulator.requests().some((r) => r.operation === 'tasks.poll'), 'a poll', 15_000);
    const loaded = cli
      .stdout()
      .split('\n')
      .filter((line) => line.includes('"loaded handler"'))
      .map((line) => JSON.parse(line) as { taskKey: string; file: string });
    expect(loaded).toEqual([
      expect.objectContaining({ taskKey: 'slow', file: join(dir, 'handlers', 'slow.ts') }),
    ]);
    cli.child.kill('SIGTERM');
    expect((await cli.exited).code).toBe(0);
  });

  it('refuses to start when a handler module calls process.exit at its top level, saying so', async () => {
    await writeHandlers({ 'exits.mjs': `process.exit(3);\n` });
    cli = runCli(['start'], env());
    const { code } = await cli.exited;
    expect(code).toBe(1);
    expect(cli.stderr()).toMatch(
      /^df-worker: could not start: .*exit code 3 \(process\.exit at its top level\?\)/m,
    );
    expect(cli.stderr()).not.toMatch(/unhandled rejection|uncaught exception/);
  });

  it('refuses a helper module at the top of the handlers folder once, saying how to keep it there', async () => {
    await writeHandlers({
      'slow.ts': SLOW_HANDLER,
      'helpers.ts': `export const double = (n: number): number => n * 2;\n`,
    });
    cli = runCli(['start'], env());
    const { code } = await cli.exited;
    expect(code).toBe(1);
    const stderr = cli.stderr();
    expect(stderr).toMatch(
      /^df-worker: error DFW_HANDLERS_LOAD: could not start: 1 handler module in ".*" failed to load/,
    );
    expect(stderr.split('helpers.ts: has no default export').length - 1).toBe(1);
    expect(stderr).toContain(
      '(a helper module that is not a handler: name it _helpers.ts or move it into a subfolder)',
    );
  });

  it('exits non-zero with a clear message when the service refuses the key at start', async () => {
    await writeHandlers({ 'slow.ts': SLOW_HANDLER });
    cli = runCli(['start'], env({ DF_API_KEY: 'wrong-key-123' }));
    const { code } = await cli.exited;
    expect(code).toBe(1);
    expect(cli.stderr()).toMatch(/refused the API key \(401/);
    expect(cli.stderr() + cli.stdout()).not.toContain('wrong-key-123');
  });

  it('serves /healthz, /readyz and /metrics while running', async () => {
    await writeHandlers({ 'slow.ts': SLOW_HANDLER });
    emulator.createTask({ key: 'slow' });
    cli = runCli(['start'], env());
    await waitFor(() => cli!.logs().some((l) => l.msg === 'df-worker started'), 'start', 15_000);
    const url = cli.logs().find((l) => l.msg === 'serving /metrics, /healthz and /readyz')!.url as string;
    const health = await fetch(`${url}/healthz`);
    expect(health.status).toBe(200);
    const ready = (await (await fetch(`${url}/readyz`)).json()) as { status: string };
    expect(ready).toMatchObject({ status: 'ready', tasks: { served: ['slow'], withoutTask: [] } });
    const metrics = await (await fetch(`${url}/metrics`)).text();
    expect(metrics).toMatch(/dfworker_budget_limit_requests\{window="month"\} 40000/);
    expect(metrics).toMatch(/dfworker_tasks_served 1/);
    expect(metrics).toMatch(/^dfworker_ready 1$/m);
    // The planner's pace for the one task: what is left of the month spread over the time left (a minute or
    // so mid-month, down to the windows' 1.2 s in its last hours), never past the 15-minute maximum.
    const interval = Number(
      /^dfworker_poll_idle_interval_seconds\{task="slow"\} ([\d.]+)$/m.exec(metrics)?.[1],
    );
    expect(interval).toBeGreaterThanOrEqual(1.2);
    expect(interval).toBeLessThanOrEqual(900);
    expect(metrics).toMatch(/^dfworker_work_overloaded 0$/m);
    cli.child.kill('SIGTERM');
    expect((await cli.exited).code).toBe(0);
  });
  it('answers the probes alone on DF_HTTP_PROBE_PORT, and exits when DF_HTTP_PORT is taken', async () => {
    await writeHandlers({ 'slow.ts': SLOW_HANDLER });
    emulator.createTask({ key: 'slow' });
    cli = runCli(['start'], env({ DF_HTTP_PROBE_PORT: '0' }));
    await waitFor(() => cli!.logs().some((l) => l.msg === 'df-worker started'), 'start', 15_000);
    const probeUrl = cli.logs().find((l) => l.msg === 'serving /healthz and /readyz on the probe port')!
      .url as string;
    const url = cli.logs().find((l) => l.msg === 'serving /metrics, /healthz and /readyz')!.url as string;
    expect(probeUrl).not.toBe(url);
    expect((await fetch(`${probeUrl}/healthz`)).status).toBe(200);
    expect(await (await fetch(`${probeUrl}/readyz`)).json()).toMatchObject({ status: 'ready' });
    expect((await fetch(`${probeUrl}/metrics`)).status).toBe(404);
    expect((await fetch(`${url}/metrics`)).status).toBe(200);
    cli.child.kill('SIGTERM');
    expect((await cli.exited).code).toBe(0);

    // The metrics port already taken: the probe port, listening first, is closed again and the process ends.
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const port = (taken.address() as AddressInfo).port;
    try {
      cli = runCli(['start'], env({ DF_HTTP_PORT: String(port), DF_HTTP_PROBE_PORT: '0' }));
      const { code } = await cli.exited;
      expect(code).not.toBe(0);
      expect(cli.stderr() + cli.stdout()).toContain('EADDRINUSE');
    } finally {
      await new Promise((resolve) => taken.close(resolve));
    }
  });

  it('fails only the execution whose handler leaked a rejection or threw from a callback, and keeps running', async () => {
    await writeHandlers({
      'leaky.ts': `import { defineTask } from 'df-worker';
export default defineTask({
  key: 'leaky',
  inputKeys: ['how'],
  handle: async (input: { how: string }) => {
    if (input.how === 'reject') void Promise.reject(new Error('stray rejection from the handler'));
    if (input.how === 'throw') setTimeout(() => { throw new Error('thrown from a timer callback'); }, 5);
    await new Promise((resolve) => setTimeout(resolve, 100));
    return { ok: true };
  },
});
`,
    });
    emulator.createTask({ key: 'leaky', inputKeys: [{ key: 'how', description: '' }] });
    const reject = emulator.enqueueExecution('leaky', { how: 'reject' });
    const thrown = emulator.enqueueExecution('leaky', { how: 'throw' });
    const fine = emulator.enqueueExecution('leaky', { how: 'nothing' });
    cli = runCli(['start'], env());
    await waitFor(() => emulator.executions().every((e) => e.reports.length > 0), 'three reports', 15_000);
    const byId = new Map(emulator.executions().map((e) => [e.id, e.reports[0]]));
    expect(byId.get(reject.id)).toMatchObject({
      status: 'FAILED',
      output: { error: 'stray rejection from the handler' },
    });
    expect(byId.get(thrown.id)).toMatchObject({
      status: 'FAILED',
      output: { error: 'thrown from a timer callback' },
    });
    expect(byId.get(fine.id)).toMatchObject({ status: 'COMPLETED', output: { ok: true } });
    expect(cli.child.exitCode).toBeNull();
    cli.child.kill('SIGTERM');
    expect((await cli.exited).code).toBe(0);
  });
  it('refuses to start a second worker on a state folder another running worker holds', async () => {
    await writeHandlers({ 'slow.ts': SLOW_HANDLER });
    emulator.createTask({ key: 'slow' });
    cli = runCli(['start'], env());
    await waitFor(() => cli!.logs().some((l) => l.msg === 'df-worker started'), 'the first worker', 15_000);
    const second = runCli(['start'], env());
    const { code } = await second.exited;
    expect(code).toBe(1);
    expect(second.stderr()).toMatch(
      new RegExp(`another df-worker \\(pid ${cli.child.pid}.*uses the state folder`),
    );
    cli.child.kill('SIGTERM');
    expect((await cli.exited).code).toBe(0);
  });

  it("keeps its compiled modules and its handlers' in Node's compile cache, even when killed, for a faster next start", async () => {
    await writeHandlers({ 'slow.ts': SLOW_HANDLER });
    emulator.createTask({ key: 'slow', inputKeys: [{ key: 'ms', description: '' }] });
    emulator.enqueueExecution('slow', { ms: 1 });
    const cache = join(dir, 'compile-cache');
    cli = runCli(['start'], env({ NODE_COMPILE_CACHE: cache }));
    await waitFor(() => emulator.executions()[0]?.reports.length === 1, 'the report', 15_000);
    // Every module the daemon loads (over 300; the threads alone save under 100 as they end), written while it
    // runs: kill -9 then leaves them, since nothing is written at exit.
    const entries = () => readdir(cache, { recursive: true }).catch(() => []);
    await vi.waitFor(async () => expect((await entries()).length).toBeGreaterThan(250), { timeout: 10_000 });
    cli.child.kill('SIGKILL');
    await cli.exited;
    const cached = await entries();
    // The handler module, compiled in its worker thread, is among them.
    const files = await Promise.all(
      cached.map((name) => readFile(join(cache, name)).catch(() => Buffer.alloc(0))),
    );
    expect(files.some((bytes) => bytes.includes('slept: input.ms'))).toBe(true);
  });
});
