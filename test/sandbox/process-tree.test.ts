// Finding and ending the processes of one tag: a tagged process, a detached child of it with an empty environment
// (found by its parent link), and an untagged bystander that must be left alone.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import {
  endTreeProcesses,
  findTreeProcesses,
  newProcessTag,
  PROCESS_TAG_VARIABLE,
} from '../../src/sandbox/process-tree.ts';

const started: ChildProcess[] = [];
afterEach(() => {
  for (const child of started.splice(0)) child.kill('SIGKILL');
});

/** A node process that starts a detached child with an empty environment, and prints that child's pid. */
function parentWithBareChild(env: Record<string, string>): Promise<{ parent: number; child: number }> {
  const code =
    "const c = require('node:child_process').spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], " +
    "{ detached: true, stdio: 'ignore', env: {} }); console.log(c.pid); setInterval(() => {}, 1000);";
  const parent = spawn(process.execPath, ['-e', code], { env: { PATH: process.env.PATH ?? '', ...env } });
  started.push(parent);
  return new Promise((resolve) =>
    parent.stdout.once('data', (chunk: Buffer) =>
      resolve({ parent: parent.pid!, child: Number(String(chunk).trim()) }),
    ),
  );
}

function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !['Z', 'X'].includes(stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3));
  } catch {
    return false;
  }
}

describe.runIf(process.platform === 'linux')('process tree', () => {
  it('finds a tagged process and its bare detached child, not a bystander, and ends both', async () => {
    const tag = newProcessTag();
    const tagged = await parentWithBareChild({ [PROCESS_TAG_VARIABLE]: tag });
    const bystander = await parentWithBareChild({ [PROCESS_TAG_VARIABLE]: newProcessTag() });
    expect((await findTreeProcesses({ tag })).sort()).toEqual([tagged.parent, tagged.child].sort());
    const signalled = await endTreeProcesses({ tag }, { boundMs: 500 });
    expect(signalled).toBe(2);
    expect([tagged.parent, tagged.child].filter(alive)).toEqual([]);
    expect([bystander.parent, bystander.child].every(alive)).toBe(true);
    process.kill(bystander.child, 'SIGKILL');
  });

  it('ends with SIGKILL, after the bound, a tagged process that ignores SIGTERM', async () => {
    const tag = newProcessTag();
    const stubborn = spawn(
      process.execPath,
      ['-e', "process.on('SIGTERM', () => {}); console.log('ready'); setInterval(() => {}, 1000);"],
      { env: { PATH: process.env.PATH ?? '', [PROCESS_TAG_VARIABLE]: tag } },
    );
    started.push(stubborn);
    await new Promise((resolve) => stubborn.stdout.once('data', resolve));
    const exited = new Promise<NodeJS.Signals | null>((resolve) =>
      stubborn.once('exit', (_code, signal) => resolve(signal)),
    );
    const startedAt = performance.now();
    await endTreeProcesses({ tag }, { boundMs: 300 });
    expect(await exited).toBe('SIGKILL');
    expect(performance.now() - startedAt).toBeGreaterThanOrEqual(300);
  });
});
