// Idle resident memory of `df-worker start` (one handler, one task, against the emulator on loopback): the quick
// check that a change adds nothing to the idle daemon (bench:footprint is the full one). Each run is a fresh
// process; the figure is the median of the samples taken over the idle phase's second half.
//   node --conditions=df-worker-source bench/idle-rss.ts [--root DIR] [--runs 3] [--idle-s 15] [--env K=V]...
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile, mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Emulator } from '../src/emulator/index.ts';

const { values } = parseArgs({
  options: {
    root: { type: 'string', default: fileURLToPath(new URL('..', import.meta.url)) },
    runs: { type: 'string', default: '3' },
    'idle-s': { type: 'string', default: '15' },
    env: { type: 'string', multiple: true, default: [] },
  },
});
const root = resolve(values.root);
const extraEnv: Record<string, string> = Object.fromEntries(
  values.env.map((pair): [string, string] => {
    const at = pair.indexOf('=');
    return [pair.slice(0, at), pair.slice(at + 1)];
  }),
);

const HANDLER = `export default { key: 'greet', inputKeys: [], outputKeys: [], handle: () => ({}) };\n`;

async function rssMb(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024;
}

async function once(): Promise<number> {
  const dir = await mkdtemp(join(tmpdir(), 'df-idle-rss-'));
  await mkdir(join(dir, 'handlers'));
  await writeFile(join(dir, 'handlers/greet.ts'), HANDLER);
  const emulator = new Emulator();
  const url = await emulator.listen(0);
  emulator.createTask({ key: 'greet' });
  const child = spawn(
    process.execPath,
    ['--conditions=df-worker-source', join(root, 'src/cli/main.ts'), 'start'],
    {
      cwd: dir,
      env: {
        PATH: process.env.PATH ?? '',
        HOME: dir,
        DF_API_URL: url,
        DF_API_KEY: 'emulator-key',
        DF_HANDLERS_DIR: join(dir, 'handlers'),
        DF_STATE_DIR: join(dir, 'state'),
        DF_HTTP_PORT: '0',
        DF_LOG_LEVEL: 'warn',
        ...extraEnv,
      },
      stdio: 'ignore',
    },
  );
  try {
    const deadline = Date.now() + 30_000;
    while (!emulator.requests().some((r) => r.operation === 'tasks.poll')) {
      if (Date.now() > deadline) throw new Error('the daemon never polled');
      await sleep(100);
    }
    const idleS = Number(values['idle-s']);
    const samples: number[] = [];
    for (let s = 0; s < idleS; s++) {
      await sleep(1000);
      if (s >= idleS / 2) samples.push(await rssMb(child.pid!));
    }
    samples.sort((a, b) => a - b);
    return samples[Math.floor(samples.length / 2)]!;
  } finally {
    child.kill('SIGTERM');
    await new Promise((done) => child.once('exit', done));
    await emulator.close();
    await rm(dir, { recursive: true, force: true });
  }
}

const figures: number[] = [];
for (let i = 0; i < Number(values.runs); i++) figures.push(await once());
const sorted = [...figures].sort((a, b) => a - b);
console.log(
  `idle RSS of df-worker start (${root}${values.env.length ? `, ${values.env.join(' ')}` : ''}): ` +
    `median ${sorted[Math.floor(sorted.length / 2)]!.toFixed(1)} MB over ${figures.length} runs ` +
    `(${figures.map((f) => f.toFixed(1)).join(', ')})`,
);
