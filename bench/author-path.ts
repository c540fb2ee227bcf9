// The author's path as a new user walks it, timed step by step: a fresh clone of a commit, `npm ci`, `npm pack`,
// `npx ./df-worker-<version>.tgz init my-worker`, `npm i` in the new project, `npm run dev` until its banner,
// then an execution enqueued from the web console's form until the page shows it COMPLETED (headless Chromium
// from the system, driven by playwright-core). Needs the npm registry (as a user does) and git.
//
//   npm run bench:author-path                       # the checkout's HEAD
//   npm run bench:author-path -- --ref 2ea0195      # a baseline commit, in the same run: --ref A --ref B
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { chromium } from 'playwright-core';

const STEP_TIMEOUT_MS = 300_000;
const REPO = path.resolve(import.meta.dirname, '..');
const NODE_BIN = path.dirname(process.execPath);

interface Step {
  name: string;
  ms?: number;
  failed?: string;
}

function run(command: string, args: string[], cwd: string): Promise<string> {
  return new Promise((resolve, reject) => {
    // The repo's Node first on PATH: what `npm ci` of the clone would give a user on an older system Node.
    const env = { ...process.env, PATH: `${NODE_BIN}:${process.env.PATH}`, CI: '' };
    const child = spawn(command, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), STEP_TIMEOUT_MS);
    child.once('close', (code) => {
      clearTimeout(timer);
      if (code === 0) resolve(output);
      else
        reject(
          new Error(
            `${command} ${args.join(' ')} exited ${code}: ${output.trim().split('\n').slice(-3).join(' | ')}`,
          ),
        );
    });
  });
}

/** Starts `npm run dev` and resolves with the console URL it prints (and the child, to stop it). */
function startDev(cwd: string): Promise<{ child: ChildProcess; consoleUrl: string }> {
  return new Promise((resolve, reject) => {
    const env = { ...process.env, PATH: `${NODE_BIN}:${process.env.PATH}` };
    const child = spawn('npm', ['run', 'dev'], {
      cwd,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    let output = '';
    const timer = setTimeout(() => reject(new Error(`no console URL within 60 s: ${output}`)), 60_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const url = /console: (http:\/\/127\.0\.0\.1:\d+\/console\S*)/.exec(output)?.[1];
      if (url && output.includes('Ctrl-C stops the session.')) {
        clearTimeout(timer);
        resolve({ child, consoleUrl: url });
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.once('exit', (code) => reject(new Error(`npm run dev exited ${code}: ${output}`)));
  });
}

async function enqueueFromConsole(consoleUrl: string, executablePath: string): Promise<void> {
  const browser = await chromium.launch({ executablePath, headless: true, args: ['--no-sandbox'] });
  try {
    const page = await browser.newPage();
    await page.goto(consoleUrl);
    await page.selectOption('#enqueue select[name=taskKey]', 'my-task');
    await page.fill('#enqueue textarea[name=input]', '{"text":"hello"}');
    await page.click('#enqueue button[type=submit]');
    const execution = page.locator('details.execution').first();
    const deadline = Date.now() + 30_000;
    while ((await execution.getAttribute('data-status').catch(() => null)) !== 'COMPLETED') {
      if (Date.now() > deadline) throw new Error('the page did not show COMPLETED within 30 s');
      await page.waitForTimeout(100);
    }
  } finally {
    await browser.close();
  }
}

async function walk(ref: string, chromiumPath: string): Promise<Step[]> {
  const steps: Step[] = [];
  const root = await mkdtemp(path.join(os.tmpdir(), 'df-worker-author-path-'));
  const clone = path.join(root, 'df-worker');
  const empty = path.join(root, 'empty');
  const project = path.join(empty, 'my-worker');
  let dev: ChildProcess | undefined;
  let consoleUrl = '';
  const timed = async (name: string, action: () => Promise<unknown>): Promise<boolean> => {
    const start = performance.now();
    try {
      await action();
      steps.push({ name, ms: performance.now() - start });
      return true;
    } catch (error) {
      steps.push({ name, failed: (error as Error).message.slice(0, 240) });
      return false;
    }
  };
  try {
    const sequence: [string, () => Promise<unknown>][] = [
      [
        'git clone',
        async () => {
          await run('git', ['clone', '-q', REPO, clone], root);
          await run('git', ['checkout', '-q', ref], clone);
        },
      ],
      ['npm ci', () => run('npm', ['ci', '--no-audit', '--no-fund'], clone)],
      ['npm pack', () => run('npm', ['pack'], clone)],
      [
        'npx <tarball> init my-worker',
        async () => {
          const tarball = (await readdir(clone)).find((name) => name.endsWith('.tgz'));
          await mkdir(empty);
          await run(
            'npx',
            ['-y', path.relative(empty, path.join(clone, tarball!)), 'init', 'my-worker'],
            empty,
          );
        },
      ],
      ['npm i', () => run('npm', ['i', '--no-audit', '--no-fund'], project)],
      [
        'npm run dev (to its banner)',
        async () => {
          const started = await startDev(project);
          dev = started.child;
          consoleUrl = started.consoleUrl;
        },
      ],
      ['enqueue on the console page → COMPLETED there', () => enqueueFromConsole(consoleUrl, chromiumPath)],
    ];
    for (const [name, action] of sequence) if (!(await timed(name, action))) break;
  } finally {
    if (dev?.pid) process.kill(-dev.pid, 'SIGINT');
    await rm(root, { recursive: true, force: true });
  }
  return steps;
}

const { values } = parseArgs({ options: { ref: { type: 'string', multiple: true } } });
const chromiumPath = process.env.DF_CHROMIUM_PATH ?? '/usr/bin/chromium';
for (const ref of values.ref ?? ['HEAD']) {
  const sha = (await run('git', ['rev-parse', '--short', ref], REPO)).trim();
  const steps = await walk(sha, chromiumPath);
  console.log(`\nauthor's path at ${ref} (${sha}):`);
  for (const step of steps) {
    console.log(
      `  ${step.name.padEnd(48)} ${step.failed ? `FAILED: ${step.failed}` : `${(step.ms! / 1000).toFixed(1)} s`}`,
    );
  }
}
