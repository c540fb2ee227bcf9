// A real `df-worker dev` session (child process, from source) for the console's browser tests and screenshots:
// handlers that log, one that fails its first attempt, and the console's URL as the session prints it.
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { waitFor } from '../daemon/harness.ts';
import { runCli, type CliProcess } from '../cli/process.ts';

export const HANDLERS: Record<string, string> = {
  'greet.ts': `export default {
  key: 'greet',
  description: 'Greets someone',
  inputKeys: ['name'],
  outputKeys: ['text'],
  handle: (input: { name: string }, ctx: { logger: { info: (message: string) => void } }) => {
    ctx.logger.info('greeting ' + input.name);
    return { text: 'hello ' + input.name };
  },
};
`,
  'flaky.ts': `export default {
  key: 'flaky',
  description: 'Fails its first attempt',
  inputKeys: ['name'],
  outputKeys: ['text'],
  retryCount: 1,
  handle: (input: { name: string }, ctx: { attempt: number; logger: { info: (message: string) => void } }) => {
    ctx.logger.info('flaky attempt ' + ctx.attempt + ' for ' + input.name);
    if (ctx.attempt === 1) throw new Error('the first attempt fails');
    return { text: 'hello again ' + input.name };
  },
};
`,
};

export interface ConsoleSession {
  process: CliProcess;
  dir: string;
  /** The emulator's base URL. */
  url: string;
  adminToken: string;
  /** As printed: `<url>/console#token=<admin token>`. */
  consoleUrl: string;
  admin(method: string, route: string, body?: unknown): Promise<Response>;
  stop(): Promise<void>;
}

/** Starts `df-worker dev` with the handlers above; resolves once its banner is printed. */
export async function startConsoleSession(env: Record<string, string> = {}): Promise<ConsoleSession> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'df-worker-console-'));
  await mkdir(path.join(dir, 'handlers'));
  for (const [name, text] of Object.entries(HANDLERS))
    await writeFile(path.join(dir, 'handlers', name), text);
  // Limits well above what the tests send, so no test waits on the service's 50-a-minute window.
  const child = runCli(['dev'], { DF_BUDGET_PER_SECOND: '50', DF_BUDGET_PER_MINUTE: '1000', ...env }, dir);
  await waitFor(
    () => child.stdout().includes('Ctrl-C stops the session.') || child.child.exitCode !== null,
    'the dev session banner',
    30_000,
  );
  const out = child.stdout();
  const consoleUrl = /console: (http:\/\/127\.0\.0\.1:\d+\/console#token=[0-9a-f]+)/.exec(out)?.[1];
  if (consoleUrl === undefined) {
    throw new Error(`df-worker dev printed no console URL:\n${out}\n${child.stderr()}`);
  }
  const url = /emulator on (http:\/\/127\.0\.0\.1:\d+)/.exec(out)![1]!;
  const adminToken = consoleUrl.split('#token=')[1]!;
  return {
    process: child,
    dir,
    url,
    adminToken,
    consoleUrl,
    admin: (method, route, body) =>
      fetch(`${url}${route}`, {
        method,
        headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      }),
    async stop() {
      if (child.child.exitCode === null) {
        child.child.kill('SIGTERM');
        const killer = setTimeout(() => child.child.kill('SIGKILL'), 10_000);
        await child.exited;
        clearTimeout(killer);
      }
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Debian's headless Chromium (DF_CHROMIUM_PATH overrides /usr/bin/chromium), driven by playwright-core. A missing
 * browser fails, never skips: CI installs it (.ci/run), and a developer is told how.
 */
export async function launchChromium(extraArgs: readonly string[] = []): Promise<Browser> {
  const executablePath = process.env.DF_CHROMIUM_PATH || '/usr/bin/chromium';
  if (!existsSync(executablePath)) {
    throw new Error(
      `No Chromium at ${executablePath}: the console's browser tests need one. Install Debian's package ` +
        '(apt-get install --no-install-recommends chromium) or set DF_CHROMIUM_PATH to a Chromium binary.',
    );
  }
  return chromium.launch({ executablePath, headless: true, args: ['--no-sandbox', ...extraArgs] });
}
