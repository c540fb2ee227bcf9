// Benchmark at the service's exact limits (5 requests/second, 50/minute): a backlog of executions is
// drained by the real Worker against the emulator over loopback. Prints executions per minute, 429s,
// and the busiest 1 s and 60 s windows seen by the emulator. The ceiling is 25 executions/minute
// (one poll and one report each).
//   ./node_modules/.bin/node --conditions=df-worker-source bench/spec-limits.ts [--backlog 100] [--tasks 3]
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { pino } from 'pino';
import { loadConfig } from '../src/config/load.ts';
import { standaloneDaemon } from '../src/standalone/standalone-mode.ts';
import { busiestWindow, Emulator } from '../src/emulator/index.ts';
import { defineTask, type TaskModule } from '../src/handlers/define-task.ts';

const { values } = parseArgs({
  options: { backlog: { type: 'string', default: '100' }, tasks: { type: 'string', default: '3' } },
});
const backlog = Number(values.backlog);
const taskCount = Number(values.tasks);

const emulator = new Emulator({
  apiKeys: ['bench'],
  limits: { perSecond: 5, perMinute: 50, perMonth: 40_000 },
});
const url = await emulator.listen();
const stateDir = await mkdtemp(join(tmpdir(), 'df-worker-bench-'));
const handlers = new Map<string, TaskModule>();
for (let t = 0; t < taskCount; t++) {
  const key = `bench-${t}`;
  handlers.set(
    key,
    defineTask({
      key,
      inputKeys: ['n'],
      outputKeys: ['double'],
      handle: (i) => ({ double: (i.n as number) * 2 }),
    }),
  );
  emulator.createTask({
    key,
    inputKeys: [{ key: 'n', description: '' }],
    outputKeys: [{ key: 'double', description: '' }],
  });
}
for (let i = 0; i < backlog; i++) emulator.enqueueExecution(`bench-${i % taskCount}`, { n: i });

const config = loadConfig({
  env: {},
  overrides: { 'api.url': url, 'api.key': 'bench', 'state.dir': stateDir, 'http.port': 0, concurrency: 4 },
  require: 'service',
});
const worker = standaloneDaemon({ config, logger: pino({ level: 'warn' }), handlers });
const started = Date.now();
await worker.start();
let firstReportAt = 0;
await new Promise<void>((resolve) => {
  const timer = setInterval(() => {
    const executions = emulator.executions();
    const done = executions.filter((e) => e.reports.length > 0).length;
    if (done > 0 && firstReportAt === 0) firstReportAt = Date.now();
    process.stderr.write(
      `\r${done}/${backlog} reported after ${((Date.now() - started) / 1000).toFixed(0)} s   `,
    );
    if (done === backlog) {
      clearInterval(timer);
      resolve();
    }
  }, 500);
});
const elapsedMs = Date.now() - started;
await worker.stop();
const requests = emulator.requests();
const wrong = emulator
  .executions()
  .filter((e) => e.reports.length !== 1 || e.reports[0]?.output.double !== (e.input.n as number) * 2).length;
process.stderr.write('\n');
console.log(
  JSON.stringify(
    {
      backlog,
      tasks: taskCount,
      elapsedSeconds: Math.round(elapsedMs / 100) / 10,
      executionsPerMinute: Math.round((backlog / (elapsedMs / 60_000)) * 10) / 10,
      requests: requests.length,
      answered429: requests.filter((r) => r.status === 429).length,
      busiestSecond: busiestWindow(requests, 1_000),
      busiestMinute: busiestWindow(requests, 60_000),
      wrongOrDuplicateReports: wrong,
    },
    null,
    2,
  ),
);
await emulator.close();
await rm(stateDir, { recursive: true, force: true });
