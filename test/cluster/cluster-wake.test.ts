// A wake asked on any replica polls: POST /wake, and the early poll after a refused report, on a replica that
// does not hold the coordinator lease reach the coordinator through Redis (clustered/cluster-wakes.ts) at its
// next heartbeat, instead of waking no poll loop at all and leaving the work to the next idle poll (~65 s at
// 40,000 requests a month).
import { describe, expect, it } from 'vitest';
import { waitFor } from '../daemon/harness.ts';
import { clusterFixture } from './cluster-rig.ts';
import { clusteredTestsRun } from './redis-server.ts';

const TOKEN = 'cluster-wake-token-0123456789';

describe.runIf(clusteredTestsRun)('a wake on a replica that does not coordinate', () => {
  const cluster = clusterFixture();

  it('polls the task within seconds, through the coordinator', async () => {
    const rig = await cluster.create({
      perSecond: 20,
      perMinute: 1_200,
      // The key's real month: idle polls of each task a minute or more apart, and no maximum interval below it.
      env: {
        DF_BUDGET_PER_MONTH: '40000',
        DF_MAX_POLL_INTERVAL_MS: '3600000',
        DF_HTTP_WAKE: 'token',
        DF_HTTP_WAKE_TOKEN: TOKEN,
      },
    });
    await Promise.all(['a', 'b'].map((name) => rig.start(name)));
    await waitFor(() => rig.coordinator() !== undefined, 'a coordinator');
    const other = rig.coordinator() === 'a' ? 'b' : 'a';
    // The first polls of a start are done: each task's next idle poll is a minute or more away.
    await waitFor(
      () => rig.emulator.requests().filter((r) => r.operation === 'tasks.poll').length >= 3,
      'the first poll of every task',
    );
    await new Promise((resolve) => setTimeout(resolve, 500));
    const polls = () => rig.emulator.requests().filter((r) => r.operation === 'tasks.poll').length;
    const before = polls();
    const execution = rig.emulator.enqueueExecution('alpha', { n: 1 });
    const url = rig.logsOf(other).find((l) => l.msg === 'serving /metrics, /healthz and /readyz')!
      .url as string;
    const askedAt = Date.now();
    const answer = await fetch(`${url}/wake?task=alpha`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(answer.status).toBe(202);
    expect(await answer.json()).toEqual({ woken: 1 });
    await waitFor(
      () => (rig.emulator.execution(execution.id)?.reports.length ?? 0) > 0,
      'the woken task polled and its execution reported',
      10_000,
    );
    const tookMs = Date.now() - askedAt;
    console.log(`wake on the non-coordinator: reported ${tookMs} ms later, ${polls() - before} poll(s)`);
    expect(tookMs).toBeLessThan(6_000);
    expect(polls() - before).toBeLessThanOrEqual(3);
  }, 60_000);
});
