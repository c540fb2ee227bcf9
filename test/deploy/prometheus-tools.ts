// Prometheus's own binaries for the monitoring tests: `promtool` and `prometheus` from Debian's `prometheus` package
// (.ci/run installs it). Outside CI a test without them is skipped, naming the package; under CI it fails.
import { execFile, spawnSync } from 'node:child_process';
import { promisify } from 'node:util';

/** True under CI (`CI=true`, as .ci/run and CI services set it): a missing tool is then a failure, not a skip. */
export const IN_CI = process.env.CI !== undefined && process.env.CI !== '' && process.env.CI !== 'false';

/** The tool's path on PATH, or undefined. */
export function findTool(name: string): string | undefined {
  const found = spawnSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' });
  const path = found.stdout.trim();
  return found.status === 0 && path !== '' ? path : undefined;
}

/** Whether the tests needing `tools` run here: yes when all are present, and always under CI (where they then fail). */
export function runsHere(...tools: string[]): boolean {
  return IN_CI || tools.every((tool) => findTool(tool) !== undefined);
}

export const MISSING_TOOL_HINT =
  "install Debian's prometheus package (apt-get install prometheus), which provides promtool and prometheus";

export interface ToolResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs a tool to completion; a non-zero exit is returned, not thrown, so tests can show its output. */
export async function runTool(tool: string, args: string[], options: { input?: string; cwd?: string } = {}) {
  const path = findTool(tool);
  if (path === undefined) throw new Error(`${tool} is not on PATH: ${MISSING_TOOL_HINT}`);
  if (options.input !== undefined) {
    const child = spawnSync(path, args, { input: options.input, encoding: 'utf8', cwd: options.cwd });
    return { code: child.status ?? -1, stdout: child.stdout, stderr: child.stderr } satisfies ToolResult;
  }
  try {
    const { stdout, stderr } = await promisify(execFile)(path, args, { cwd: options.cwd });
    return { code: 0, stdout, stderr } satisfies ToolResult;
  } catch (error) {
    const failed = error as { code?: number; stdout?: string; stderr?: string };
    if (typeof failed.code !== 'number') throw error;
    return {
      code: failed.code,
      stdout: failed.stdout ?? '',
      stderr: failed.stderr ?? '',
    } satisfies ToolResult;
  }
}
