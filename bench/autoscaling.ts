// The autoscaling signal (dfworker_cluster_saturation, what the chart's HPA and KEDA ScaledObject scale on) under a
// backlog of slow handlers: it rises to 1 with one replica whose slot is always taken, and falls once 3 replicas
// share the work, because the key's budget, not the replicas, bounds the claims. At the service's 50 requests a
// minute a claim and its report cost 2 requests, so the key claims at most 25 executions a minute whatever the
// replica count: replicas past that ceiling add idle slots, and the signal says so. Real daemons, a real
// redis-server, the emulator on loopback with the service's limits.
//   npm run bench:autoscaling [-- --handler-ms 4000 --backlog 40 --one-seconds 30 --three-seconds 60]
import { parseArgs } from 'node:util';
import { ClusterRig } from '../test/cluster/cluster-rig.ts';
import { RedisServer } from '../test/cluster/redis-server.ts';

const { values } = parseArgs({
  options: {
    'handler-ms': { type: 'string', default: '4000' },
    backlog: { type: 'string', default: '40' },
    'one-seconds': { type: 'string', default: '30' },
    'three-seconds': { type: 'string', default: '60' },
  },
});
const HANDLER_MS = Number(values['handler-ms']);
const BACKLOG = Number(values.backlog);
const PER_SECOND = 5;
const PER_MINUTE = 50;
const CONCURRENCY = 1;

interface Sample {
  atS: number;
  replicas: number;
  saturation: number | undefined;
  reported: number;
}

function gauge(scrape: string, name: string): number | undefined {
  const line = scrape.split('\n').find((l) => l.startsWith(`${name} `));
  return line === undefined ? undefined : Number(line.slice(name.length + 1));
}

function reported(rig: ClusterRig): number {
  return rig.emulator.executions().filter((e) => e.reports.length > 0).length;
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

const server = await RedisServer.start();
const rig = await ClusterRig.create({
  redis: server,
  perSecond: PER_SECOND,
  perMinute: PER_MINUTE,
  concurrency: CONCURRENCY,
});
const samples: Sample[] = [];
try {
  console.log(
    `bench:autoscaling: a backlog of ${BACKLOG} executions of a ${HANDLER_MS} ms handler, ${CONCURRENCY} slot a ` +
      `replica, budget ${PER_SECOND}/s and ${PER_MINUTE}/min; 1 replica for ${values['one-seconds']} s, then 3 ` +
      `for ${values['three-seconds']} s`,
  );
  await rig.start('a');
  const startedAt = Date.now();
  let replicas = 1;
  const sample = async () => {
    const saturation = gauge(await rig.metrics('a'), 'dfworker_cluster_saturation');
    samples.push({ atS: (Date.now() - startedAt) / 1000, replicas, saturation, reported: reported(rig) });
  };
  const sampleFor = async (seconds: number) => {
    const until = Date.now() + seconds * 1000;
    while (Date.now() < until) {
      await sample();
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  };
  await sampleFor(3);
  rig.enqueue(BACKLOG, (n) => ({ n, ms: HANDLER_MS }));
  const oneFrom = samples.length;
  await sampleFor(Number(values['one-seconds']));
  const threeFrom = samples.length;
  await Promise.all([rig.start('b'), rig.start('c')]);
  replicas = 3;
  await sampleFor(Number(values['three-seconds']));

  console.log('\ns | replicas | saturation | reported');
  console.log('--- | --- | --- | ---');
  for (const s of samples.filter((_, i) => i % 3 === 0 || i === samples.length - 1))
    console.log(`${s.atS.toFixed(0)} | ${s.replicas} | ${s.saturation?.toFixed(2) ?? '-'} | ${s.reported}`);

  // Each phase's settled part: its second half, past the start and the new replicas' joining.
  const phase = (from: number, to: number) => {
    const part = samples.slice(from + Math.floor((to - from) / 2), to);
    const spanS = part.at(-1)!.atS - part[0]!.atS;
    return {
      saturation: mean(part.map((s) => s.saturation ?? 0)),
      perMinute: ((part.at(-1)!.reported - part[0]!.reported) / spanS) * 60,
    };
  };
  const one = phase(oneFrom, threeFrom);
  const three = phase(threeFrom, samples.length);
  const figures = rig.figures();
  const capacityPerMinute = (replicas: number) => (replicas * CONCURRENCY * 60_000) / HANDLER_MS;
  console.log(
    `\n1 replica: saturation ${one.saturation.toFixed(2)} (mean of the phase's second half), ` +
      `${one.perMinute.toFixed(1)} executions reported a minute (its slots' capacity ${capacityPerMinute(1).toFixed(0)})`,
  );
  console.log(
    `3 replicas: saturation ${three.saturation.toFixed(2)}, ${three.perMinute.toFixed(1)} a minute ` +
      `(slots' capacity ${capacityPerMinute(3).toFixed(0)}; the budget's ceiling ${PER_MINUTE / 2}: ` +
      `a claim and its report are 2 of the ${PER_MINUTE} requests a minute)`,
  );
  console.log(
    `most requests the emulator saw in any minute: ${figures.maxPerMinute} (limit ${PER_MINUTE}), in any second ` +
      `${figures.maxPerSecond} (limit ${PER_SECOND}); 429s: ${figures.rateLimited}; duplicated reports: ` +
      `${figures.duplicated}`,
  );
  const byOperation = new Map<string, number>();
  for (const request of rig.emulator.requests().filter((r) => r.apiKeyValid && r.status !== 0))
    byOperation.set(request.operation, (byOperation.get(request.operation) ?? 0) + 1);
  const total = [...byOperation.values()].reduce((a, b) => a + b, 0);
  console.log(
    `requests over the run: ${total} for ${reported(rig)} executions reported ` +
      `(${(total / reported(rig)).toFixed(2)} each), by operation: ` +
      [...byOperation].map(([operation, count]) => `${operation} ${count}`).join(', '),
  );
  console.log(
    `KEDA/HPA at target 0.8: ceil(1 x ${one.saturation.toFixed(2)} / 0.8) = ${Math.ceil(one.saturation / 0.8)} ` +
      `replicas wanted with 1; ceil(3 x ${three.saturation.toFixed(2)} / 0.8) = ` +
      `${Math.ceil((3 * three.saturation) / 0.8)} with 3`,
  );
} finally {
  await rig.dispose();
  await server.dispose();
}
