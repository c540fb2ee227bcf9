// How long a slot of the shared budget takes on loopback: the Lua script's round trip (TIME, the windows, the
// month count) as a replica sees it, beside a PING, alone and with four replicas taking slots at once. The
// window's safety margin (DF_BUDGET_SAFETY_MARGIN_MS, 200 ms by default) must exceed how much the delay from the
// script's instant to the request leaving varies; this prints that delay's spread.
//   node --conditions=df-worker-source bench/shared-budget-round-trip.ts [--takes 5000]
import { parseArgs } from 'node:util';
import pino from 'pino';
import { Budget } from '../src/budget/budget.ts';
import { systemClock } from '../src/clock/clock.ts';
import { clusterKeys, connectRedis } from '../src/clustered/redis.ts';
import { SharedBudget } from '../src/clustered/shared-budget.ts';
import { RedisServer } from '../test/cluster/redis-server.ts';

const { values } = parseArgs({ options: { takes: { type: 'string', default: '5000' } } });
const TAKES = Number(values.takes);
/** High enough that no take waits for a window: only the round trip is timed. */
const LIMITS = { perSecond: 1_000_000, perMinute: 10_000_000, perMonth: 1_000_000_000 };

function percentiles(samples: number[]): string {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
  return `p50 ${at(0.5).toFixed(3)} ms, p99 ${at(0.99).toFixed(3)} ms, max ${sorted.at(-1)!.toFixed(3)} ms (${sorted.length} samples)`;
}

async function replica(server: RedisServer, apiKey: string): Promise<SharedBudget> {
  const redis = connectRedis(server.url);
  await redis.connect();
  const local = new Budget({ limits: LIMITS, clock: systemClock, safetyMarginMs: 200 });
  await local.load();
  const budget = new SharedBudget({
    local,
    redis,
    keys: clusterKeys(apiKey),
    clock: systemClock,
    safetyMarginMs: 200,
    replicaId: 'bench',
    logger: pino({ level: 'silent' }),
  });
  await budget.load();
  return budget;
}

async function timeTakes(budget: SharedBudget, count: number): Promise<number[]> {
  const samples: number[] = [];
  for (let i = 0; i < count; i++) {
    const started = performance.now();
    await budget.acquire('executions.report');
    samples.push(performance.now() - started);
  }
  return samples;
}

const server = await RedisServer.start();
try {
  const ping = connectRedis(server.url);
  await ping.connect();
  const pings: number[] = [];
  for (let i = 0; i < TAKES; i++) {
    const started = performance.now();
    await ping.ping();
    pings.push(performance.now() - started);
  }
  ping.disconnect();
  console.log(`PING round trip: ${percentiles(pings)}`);

  const alone = await replica(server, 'bench-alone');
  await timeTakes(alone, 200); // warm-up: the script cached, the JIT warm
  console.log(`budget slot, one replica: ${percentiles(await timeTakes(alone, TAKES))}`);

  const four = await Promise.all([1, 2, 3, 4].map(() => replica(server, 'bench-four')));
  const together = await Promise.all(four.map((b) => timeTakes(b, Math.ceil(TAKES / 4))));
  console.log(`budget slot, four replicas at once: ${percentiles(together.flat())}`);
} finally {
  await server.dispose();
}
// The budgets' Redis connections stay open: nothing else is left to wait for.
process.exit(0);
