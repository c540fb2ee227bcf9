// Runs the real CLI (`src/cli/main.ts`) as a child process on this test run's Node, and collects its output.
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));

export interface CliProcess {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  /** JSON log lines written so far (stdout). */
  logs: () => Record<string, unknown>[];
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/**
 * The checkout whose CLI runs: this one, or DF_WORKER_UNDER_TEST (a worktree of an earlier commit, with which
 * bench/faults-report.ts prints a baseline beside today's figures).
 */
function cliRoot(): string {
  const root = process.env.DF_WORKER_UNDER_TEST;
  return root === undefined || root === '' ? REPO_ROOT : root.endsWith('/') ? root : `${root}/`;
}

export function runCli(args: string[], env: Record<string, string>, cwd = REPO_ROOT): CliProcess {
  const child = spawn(
    process.execPath,
    ['--conditions=df-worker-source', `${cliRoot()}src/cli/main.ts`, ...args],
    {
      cwd,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let out = '';
  let err = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal })),
  );
  return {
    child,
    stdout: () => out,
    stderr: () => err,
    logs: () =>
      out
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as Record<string, unknown>),
    exited,
  };
}
