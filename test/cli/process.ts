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
  // Parsed as they arrive, once: scenarios poll logs() every few ms while a daemon writes thousands of lines.
  const logLines: Record<string, unknown>[] = [];
  let parsedUpTo = 0;
  child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
  const logs = () => {
    const end = out.lastIndexOf('\n') + 1;
    if (end > parsedUpTo) {
      for (const line of out.slice(parsedUpTo, end).split('\n')) {
        if (line.startsWith('{')) logLines.push(JSON.parse(line) as Record<string, unknown>);
      }
      parsedUpTo = end;
    }
    return [...logLines];
  };
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal })),
  );
  return {
    child,
    stdout: () => out,
    stderr: () => err,
    logs,
    exited,
  };
}
