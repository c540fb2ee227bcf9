// What tracing costs the daemon (`df-worker start` as a child process, 20 handler modules and 20 tasks, the
// emulator on loopback). Tracing off: start to first poll and idle RSS of this checkout beside --baseline-ref
// (the commit before tracing), same set-up for both (each its own compile cache, the first start cold), runs
// interleaved so that the machine's drift falls on both alike. Tracing on: a backlog drained with the service's
// limits lifted, tracing off and on (spans to a sink collector in this process), ms per execution and peak RSS.
//   node --conditions=df-worker-source bench/tracing.ts [--runs 5 --idle-s 10 --backlog 1000 --drains 3
//     --baseline-ref 2ea0195]   (--runs 0: the drains only)
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { rm } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import {
  checkOutBaseline,
  compileCacheFolder,
  drainBacklog,
  firstPoll,
  interleaved,
  median,
  ROOT,
  sample,
  startDaemon,
  type DaemonConfiguration,
} from './daemon-process.ts';

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '5' },
    'idle-s': { type: 'string', default: '10' },
    backlog: { type: 'string', default: '1000' },
    drains: { type: 'string', default: '3' },
    'baseline-ref': { type: 'string', default: '2ea0195' },
  },
});
const RUNS = Number(values.runs);
const IDLE_S = Number(values['idle-s']);
const BACKLOG = Number(values.backlog);
const DRAINS = Number(values.drains);
const TASKS = 20;

/** A collector that takes every export and counts its spans. */
async function sink(): Promise<{ url: string; spans: () => number; close: () => Promise<void> }> {
  let spans = 0;
  const server = http.createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
        resourceSpans?: { scopeSpans?: { spans?: unknown[] }[] }[];
      };
      for (const r of body.resourceSpans ?? [])
        for (const s of r.scopeSpans ?? []) spans += s.spans?.length ?? 0;
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    spans: () => spans,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

const round = (x: number, digits = 0) => Math.round(x * 10 ** digits) / 10 ** digits;

// Tracing off: before and now, interleaved.
const baseline = await checkOutBaseline(values['baseline-ref']);
const off: Record<string, DaemonConfiguration> = {
  before: { root: baseline.root, compileCache: await compileCacheFolder(), env: {} },
  now: { root: ROOT, compileCache: await compileCacheFolder(), env: {} },
};
const starts: Record<string, number[]> = { before: [], now: [] };
const idle: Record<string, number[]> = { before: [], now: [] };
for (let run = 0; run < RUNS; run++) {
  for (const [name, configuration] of interleaved(Object.entries(off), run)) {
    const daemon = await startDaemon(configuration, { tasks: TASKS, limitsLifted: false });
    starts[name]!.push(await firstPoll(daemon));
    await sleep(IDLE_S * 1000);
    idle[name]!.push(round((await sample(daemon.child.pid!)).rssMb, 1));
    await daemon.close();
    console.error(
      `tracing off, ${name}, run ${run + 1}: first poll ${starts[name]!.at(-1)} ms, idle ${idle[name]!.at(-1)} MB`,
    );
  }
}
if (RUNS > 0) {
  console.log(
    `tracing off (${RUNS} runs each, interleaved; the first start of each has an empty compile cache)`,
  );
  console.log('figure | before | now');
  console.log('--- | --- | ---');
  console.log(
    `start to first poll, each run (ms) | ${starts.before!.join(', ')} | ${starts.now!.join(', ')}`,
  );
  console.log(
    `start to first poll, median of runs 2-${RUNS} (ms) | ${median(starts.before!.slice(1))} | ${median(starts.now!.slice(1))}`,
  );
  console.log(
    `idle RSS after ${IDLE_S} s, each run (MB) | ${idle.before!.join(', ')} | ${idle.now!.join(', ')}`,
  );
  console.log(`idle RSS, median (MB) | ${median(idle.before!)} | ${median(idle.now!)}`);
}

// Tracing on: a backlog drained, off and on, interleaved.
const collector = await sink();
const drains: Record<string, { ms: number; peak: number; tree: number; spans: number }[]> = {
  off: [],
  on: [],
};
const modes: Record<string, DaemonConfiguration> = {
  off: off.now!,
  on: { ...off.now!, env: { OTEL_EXPORTER_OTLP_ENDPOINT: collector.url } },
};
for (let run = 0; run < DRAINS; run++) {
  for (const [name, configuration] of interleaved(Object.entries(modes), run)) {
    const spansBefore = collector.spans();
    const daemon = await startDaemon(configuration, { tasks: TASKS, limitsLifted: true });
    const drain = await drainBacklog(daemon, BACKLOG, Infinity);
    await daemon.close();
    drains[name]!.push({
      ms: drain.ms,
      peak: drain.rssMbMax,
      tree: drain.treeRssMbMax,
      spans: collector.spans() - spansBefore,
    });
    console.error(`drain ${name}, run ${run + 1}: ${JSON.stringify(drains[name]!.at(-1))}`);
  }
}
await collector.close();
console.log(`\ndraining ${BACKLOG} executions, limits lifted (${DRAINS} runs each, interleaved)`);
console.log('figure | tracing off | tracing on');
console.log('--- | --- | ---');
const each = (name: string, read: (d: { ms: number; peak: number; tree: number; spans: number }) => number) =>
  drains[name]!.map(read).join(', ');
console.log(
  `ms per execution, each run | ${each('off', (d) => round(d.ms / BACKLOG, 2))} | ${each('on', (d) => round(d.ms / BACKLOG, 2))}`,
);
console.log(`peak RSS of the daemon (MB) | ${each('off', (d) => d.peak)} | ${each('on', (d) => d.peak)}`);
console.log(
  `peak RSS with handler processes (MB) | ${each('off', (d) => d.tree)} | ${each('on', (d) => d.tree)}`,
);
console.log(`spans received | ${each('off', (d) => d.spans)} | ${each('on', (d) => d.spans)}`);
for (const configuration of Object.values(off))
  await rm(configuration.compileCache!, { recursive: true, force: true });
await baseline.remove();
