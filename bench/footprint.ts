// Resource use of the real daemon (`df-worker start` as a child process) against the emulator: resident
// memory and CPU while idle, then while draining a backlog at the service's limits.
//   npm run bench:footprint [-- --idle-s 30 --backlog 25]
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile, mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Emulator } from '../src/emulator/index.ts';

const { values } = parseArgs({
  options: { 'idle-s': { type: 'string', default: '30' }, backlog: { type: 'string', default: '25' } },
});
const idleSeconds = Number(values['idle-s']);
const backlog = Number(values.backlog);
const root = fileURLToPath(new URL('..', import.meta.url));
const dir = await mkdtemp(join(tmpdir(), 'df-worker-footprint-'));
await mkdir(join(dir, 'handlers'));
for (const key of ['a', 'b', 'c']) {
  await writeFile(
    join(dir, 'handlers', `${key}.ts`),
    `import { defineTask } from 'df-worker';\nexport default defineTask({ key: '${key}', inputKeys: ['n'], outputKeys: ['n2'], handle: (i: { n: number }) => ({ n2: i.n * 2 }) });\n`,
  );
}
const emulator = new Emulator({ apiKeys: ['bench'] });
const url = await emulator.listen();
for (const key of ['a', 'b', 'c']) {
  emulator.createTask({
    key,
    inputKeys: [{ key: 'n', description: '' }],
    outputKeys: [{ key: 'n2', description: '' }],
  });
}
const child = spawn(
  process.execPath,
  ['--conditions=df-worker-source', join(root, 'src/cli/main.ts'), 'start'],
  {
    env: {
      PATH: process.env.PATH ?? '',
      DF_API_URL: url,
      DF_API_KEY: 'bench',
      DF_HANDLERS_DIR: join(dir, 'handlers'),
      DF_STATE_DIR: join(dir, 'state'),
      DF_HTTP_PORT: '0',
      DF_LOG_LEVEL: 'warn',
    },
    stdio: 'ignore',
  },
);
const pid = child.pid!;
const ticksPerSecond = 100;

async function sample(): Promise<{ rssMb: number; cpuTicks: number }> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const rssKb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
  const stat = (await readFile(`/proc/${pid}/stat`, 'utf8')).split(') ')[1]!.split(' ');
  return { rssMb: rssKb / 1024, cpuTicks: Number(stat[11]) + Number(stat[12]) };
}

async function phase(seconds: number, until?: () => boolean) {
  const first = await sample();
  const started = Date.now();
  let maxRss = first.rssMb;
  while ((until ? !until() : true) && Date.now() - started < seconds * 1000) {
    await new Promise((resolve) => setTimeout(resolve, 500));
    maxRss = Math.max(maxRss, (await sample()).rssMb);
  }
  const last = await sample();
  const wallS = (Date.now() - started) / 1000;
  return {
    seconds: Math.round(wallS),
    rssMbEnd: Math.round(last.rssMb),
    rssMbMax: Math.round(maxRss),
    cpuPercent: Math.round(((last.cpuTicks - first.cpuTicks) / ticksPerSecond / wallS) * 1000) / 10,
  };
}

await new Promise((resolve) => setTimeout(resolve, 3_000)); // start-up
const idle = await phase(idleSeconds);
for (let i = 0; i < backlog; i++) emulator.enqueueExecution(['a', 'b', 'c'][i % 3]!, { n: i });
const busy = await phase(600, () => emulator.executions().every((e) => e.reports.length > 0));
child.kill('SIGTERM');
await new Promise((resolve) => child.on('exit', resolve));
console.log(
  JSON.stringify(
    { idle, drainingBacklog: { backlog, ...busy }, requests: emulator.requests().length },
    null,
    2,
  ),
);
await emulator.close();
await rm(dir, { recursive: true, force: true });
