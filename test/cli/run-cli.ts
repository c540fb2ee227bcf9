// Helpers of the handler-tooling CLI tests: the real CLI as a child process run to completion, temp folders
// removed after each test, and in-process capture of what a command writes.
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, vi } from 'vitest';

export const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));
const MAIN = path.join(REPO_ROOT, 'src/cli/main.ts');

/** The longest a command run by `cli` may take, in ms: far beyond any of them on a loaded 2-core machine. */
const CLI_TIMEOUT_MS = 120_000;

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs `df-worker <args>` on this test run's Node and resolves once its output streams are closed. The child
 * sees only PATH, HOME and `env`, so DF_* variables of the shell running the tests cannot leak in.
 */
export function cli(args: string[], env: Record<string, string> = {}, cwd = REPO_ROOT): Promise<CliResult> {
  const child = spawn(process.execPath, ['--conditions=df-worker-source', MAIN, ...args], {
    cwd,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? os.tmpdir(), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    // A command that hangs is killed (SIGTERM) rather than outliving its test; code is then null.
    timeout: CLI_TIMEOUT_MS,
  });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    // 'close' (not 'exit') waits for stdout and stderr to be fully read.
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}

const tempDirs: string[] = [];

afterEach(async () => {
  await Promise.all(tempDirs.splice(0).map((dir) => rm(dir, { recursive: true, force: true })));
});

/** A fresh folder under the OS temp folder, removed after the test; `files` are written into it. */
export async function tempDir(files: Record<string, string> = {}): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'df-worker-cli-'));
  tempDirs.push(dir);
  for (const [name, text] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(dir, name)), { recursive: true });
    await writeFile(path.join(dir, name), text);
  }
  return dir;
}

/** Runs a command in-process, collecting (and hiding) what it writes to stdout and stderr. */
export async function captureOutput(run: () => Promise<number>): Promise<CliResult> {
  let stdout = '';
  let stderr = '';
  const out = vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
    stdout += String(chunk);
    return true;
  });
  const err = vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
    stderr += String(chunk);
    return true;
  });
  try {
    const code = await run();
    return { code, stdout, stderr };
  } finally {
    out.mockRestore();
    err.mockRestore();
  }
}
