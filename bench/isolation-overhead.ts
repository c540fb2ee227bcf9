// What handler isolation costs per execution and per worker, beside the naive baseline (isolation none,
// handlers on the daemon's own loop), each mode measured in a fresh process of its own:
// - cold start: the first attempt on a new worker (spawn, import of the handler module);
// - latency: p50/p99 of one trivial execution at a time through the runner (no service, no journal);
// - backlog: 2,000 executions with 2 ms of CPU each at concurrency 4: throughput and p50/p99;
// - memory: resident and private (anonymous) memory per warm idle worker, and peak resident memory under the
//   backlog.
// The per-worker memory and the first attempt are written to bench/figures.json, which the guides quote through
// `npm run docs` (src/docs/figures.ts); --no-write leaves it alone.
//   npm run bench:isolation [-- --executions 1000 --backlog 2000 --no-write]
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import PQueue from 'p-queue';
import { pino } from 'pino';
import type { TaskExecution } from '../src/api/types.ts';
import { systemClock } from '../src/clock/clock.ts';
import type { TaskModule } from '../src/handlers/define-task.ts';
import { registerSelfResolution } from '../src/handlers/self-resolve.ts';
import { inlineHost, type AttemptHost } from '../src/runner/attempt-host.ts';
import { runExecution } from '../src/runner/run-execution.ts';
import { HandlerPool } from '../src/sandbox/handler-pool.ts';
import { writeFigures, type Figure } from '../src/docs/figures.ts';

const { values } = parseArgs({
  options: {
    mode: { type: 'string' },
    executions: { type: 'string', default: '1000' },
    backlog: { type: 'string', default: '2000' },
    'no-write': { type: 'boolean', default: false },
  },
});
const MODES = ['none', 'thread', 'process'] as const;
type Mode = (typeof MODES)[number];
const CONCURRENCY = 4;

interface Figures {
  mode: Mode;
  coldStartMs: number;
  p50Ms: number;
  p99Ms: number;
  idleRssPerWorkerMb: number;
  /** Anonymous memory (heap, Buffers, native): what each more worker adds to a container's memory. */
  idlePrivatePerWorkerMb: number;
  /** Workers alive when the per-worker figures were read. */
  warmWorkers: number;
  backlogSeconds: number;
  backlogPerSecond: number;
  backlogP50Ms: number;
  backlogP99Ms: number;
  peakRssMb: number;
}

const HANDLER = `
import { defineTask } from 'df-worker';
export default defineTask({
  key: 'bench',
  inputKeys: ['n'],
  outputKeys: ['n2'],
  handle: async (input: { n: number; cpuMs?: number; waitMs?: number }) => {
    const until = performance.now() + (input.cpuMs ?? 0);
    while (performance.now() < until) {}
    if (input.waitMs) await new Promise((resolve) => setTimeout(resolve, input.waitMs));
    return { n2: input.n * 2 };
  },
});
`;

if (values.mode === undefined) await compare();
else await measure(values.mode as Mode);

async function compare(): Promise<void> {
  const results: Figures[] = [];
  for (const mode of MODES) {
    process.stderr.write(`measuring isolation ${mode}...\n`);
    const child = spawn(
      process.execPath,
      [
        '--expose-gc',
        '--conditions=df-worker-source',
        fileURLToPath(import.meta.url),
        '--mode',
        mode,
        '--executions',
        values.executions,
        '--backlog',
        values.backlog,
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    await new Promise((resolve) => child.once('close', resolve));
    results.push(JSON.parse(out.trim().split('\n').at(-1)!) as Figures);
  }
  const base = results[0]!;
  const row = (cells: string[]) => `| ${cells.join(' | ')} |`;
  console.log(
    row([
      'isolation',
      'cold start',
      'p50',
      'p99',
      'p50 added',
      'p99 added',
      'RSS per idle worker',
      `backlog of ${values.backlog}`,
      'backlog p50 / p99',
      'peak RSS',
    ]),
  );
  console.log(row(Array.from({ length: 10 }, () => '---')));
  for (const r of results) {
    console.log(
      row([
        r.mode,
        `${r.coldStartMs.toFixed(0)} ms`,
        `${r.p50Ms.toFixed(3)} ms`,
        `${r.p99Ms.toFixed(3)} ms`,
        r === base ? '(baseline)' : `+${(r.p50Ms - base.p50Ms).toFixed(3)} ms`,
        r === base ? '(baseline)' : `+${(r.p99Ms - base.p99Ms).toFixed(3)} ms`,
        r.mode === 'none'
          ? '-'
          : `${r.idleRssPerWorkerMb.toFixed(1)} MB (${r.idlePrivatePerWorkerMb.toFixed(1)} MB private, ${r.warmWorkers} workers)`,
        `${r.backlogSeconds.toFixed(2)} s (${r.backlogPerSecond.toFixed(0)}/s)`,
        `${r.backlogP50Ms.toFixed(2)} / ${r.backlogP99Ms.toFixed(2)} ms`,
        `${r.peakRssMb.toFixed(0)} MB`,
      ]),
    );
  }
  console.log(
    `\n${CONCURRENCY} workers, ${values.executions} sequential executions of a trivial handler, then a backlog ` +
      `of ${values.backlog} executions of 2 ms CPU each at concurrency ${CONCURRENCY} on ${process.platform}.`,
  );
  if (!values['no-write']) {
    const written = await writeFigures(isolationFigures(results));
    console.log(
      `\nWritten to ${written}: ${isolationFigures(results)
        .map((f) => f.name)
        .join(', ')}.`,
    );
  }
}

/** The figures the guides quote: what a worker of each pool holds and adds per execution, and the backlog. */
function isolationFigures(results: Figures[]): Figure[] {
  const command = `npm run bench:isolation -- --executions ${values.executions} --backlog ${values.backlog}`;
  const base = results.find((r) => r.mode === 'none')!;
  const figures: Figure[] = [];
  const add = (name: string, value: number, unit: Figure['unit'], meaning: string) =>
    figures.push({ name, value, unit, meaning, command });
  for (const r of results) {
    add(
      `isolation-${r.mode}-backlog-ms`,
      r.backlogSeconds * 1000,
      'ms',
      `${values.backlog} executions of 2 ms CPU at concurrency ${CONCURRENCY}, isolation ${r.mode}`,
    );
    add(`isolation-${r.mode}-peak-rss-mb`, r.peakRssMb, 'MB', `peak resident memory in that backlog`);
    if (r.mode === 'none') continue;
    const worker = r.mode === 'process' ? 'handler process' : 'handler thread';
    add(`${r.mode}-worker-p50-added-ms`, r.p50Ms - base.p50Ms, 'ms', `p50 of one execution, over none`);
    add(`${r.mode}-worker-p99-added-ms`, r.p99Ms - base.p99Ms, 'ms', `p99 of one execution, over none`);
    add(
      `${r.mode}-worker-first-attempt-ms`,
      r.coldStartMs,
      'ms',
      `a new ${worker}'s first attempt (start, import of the handler), ${CONCURRENCY} started at once`,
    );
    if (r.mode === 'thread') {
      add('thread-worker-mb', r.idleRssPerWorkerMb, 'MB', `resident memory a warm, idle ${worker} adds`);
    } else {
      add(
        'process-worker-private-mb',
        r.idlePrivatePerWorkerMb,
        'MB',
        `private (anonymous) resident memory of a warm, idle ${worker}`,
      );
      add(
        'process-worker-rss-mb',
        r.idleRssPerWorkerMb,
        'MB',
        `resident memory of a warm, idle ${worker}, with the node binary's pages it shares`,
      );
    }
  }
  return figures;
}

async function measure(mode: Mode): Promise<void> {
  const dir = await mkdtemp(path.join(tmpdir(), 'df-isolation-bench-'));
  const file = path.join(dir, 'bench.ts');
  await writeFile(file, HANDLER);
  registerSelfResolution();
  const module = (await import(pathToFileURL(file).href)) as { default: TaskModule };
  const handler = { ...module.default, file };
  const logger = pino({ level: 'silent' });
  const pool =
    mode === 'none'
      ? undefined
      : new HandlerPool({
          isolation: mode,
          memoryMb: 512,
          env: { PATH: process.env.PATH ?? '' },
          logger,
          redact: (text) => text,
          maxIdle: CONCURRENCY,
        });
  const host: AttemptHost = pool ?? inlineHost;
  let seq = 0;
  const runOne = async (input: Record<string, number>): Promise<number> => {
    const execution: TaskExecution = {
      object: 'task_execution',
      id: `e-${++seq}`,
      taskId: 't',
      status: 'IN_PROGRESS',
      createdAt: '',
      input,
    };
    const started = performance.now();
    const outcome = await runExecution({
      handler,
      task: { key: 'bench', retryCount: 0, inputKeys: handler.inputKeys, outputKeys: handler.outputKeys },
      execution,
      clock: systemClock,
      logger,
      defaultTimeoutMs: 10_000,
      host,
    });
    if (outcome.status !== 'COMPLETED') throw new Error(`bench execution failed: ${JSON.stringify(outcome)}`);
    return performance.now() - started;
  };

  await settle();
  const before = await memoryMb(pool);
  // Cold start: the first attempt of each of CONCURRENCY new workers, at once.
  const cold = await Promise.all(Array.from({ length: CONCURRENCY }, (_, n) => runOne({ n })));
  // The pool adds a worker only when an attempt waited for a busy one: attempts that wait 1.5 s each bring it
  // to CONCURRENCY warm workers, whose memory is then read idle.
  await Promise.all(Array.from({ length: CONCURRENCY }, (_, n) => runOne({ n, waitMs: 1_500 })));
  const warmWorkers = pool?.workers.total ?? 0;
  await settle();
  const after = await memoryMb(pool);
  const perWorker = (mb: number) => (warmWorkers === 0 ? 0 : mb / warmWorkers);
  const idleRssPerWorkerMb = perWorker(after.rss - before.rss);
  const idlePrivatePerWorkerMb = perWorker(after.private - before.private);

  const latencies: number[] = [];
  for (let n = 0; n < Number(values.executions); n++) latencies.push(await runOne({ n }));

  let peak = (await memoryMb(pool)).rss;
  const sampler = setInterval(() => void memoryMb(pool).then((mb) => (peak = Math.max(peak, mb.rss))), 50);
  const queue = new PQueue({ concurrency: CONCURRENCY });
  const backlog: number[] = [];
  const started = performance.now();
  await queue.addAll(
    Array.from(
      { length: Number(values.backlog) },
      (_, n) => async () => backlog.push(await runOne({ n, cpuMs: 2 })),
    ),
  );
  const backlogSeconds = (performance.now() - started) / 1000;
  clearInterval(sampler);
  await pool?.close();
  await rm(dir, { recursive: true, force: true });
  const figures: Figures = {
    mode,
    coldStartMs: Math.max(...cold),
    p50Ms: percentile(latencies, 0.5),
    p99Ms: percentile(latencies, 0.99),
    idleRssPerWorkerMb,
    idlePrivatePerWorkerMb,
    warmWorkers,
    backlogSeconds,
    backlogPerSecond: backlog.length / backlogSeconds,
    backlogP50Ms: percentile(backlog, 0.5),
    backlogP99Ms: percentile(backlog, 0.99),
    peakRssMb: peak,
  };
  console.log(JSON.stringify(figures));
}

async function settle(): Promise<void> {
  for (let i = 0; i < 3; i++) {
    (globalThis as { gc?: () => void }).gc?.();
    await sleep(300);
  }
}

/**
 * Resident memory of this process and of the pool's worker processes, in MB: all of it, and its private
 * (anonymous) part, without the file-backed pages of the node binary that every process shares.
 */
async function memoryMb(pool: HandlerPool | undefined): Promise<{ rss: number; private: number }> {
  const pids = [process.pid, ...new Set(pool?.workerPids() ?? [])].filter(
    (pid, i) => i === 0 || pid !== process.pid,
  );
  let rss = 0;
  let anonymous = 0;
  for (const pid of pids) {
    const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
    const kb = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(status)?.[1] ?? 0);
    rss += kb('VmRSS');
    anonymous += kb('RssAnon');
  }
  return { rss: rss / 1024, private: anonymous / 1024 };
}

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? NaN;
}
