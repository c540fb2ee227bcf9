// Successor pacing in clustered mode: the coordinator alone polls, but any replica runs and reports. A step
// reported on a replica that does not coordinate reaches the coordinator through Redis
// (clustered/cluster-reports.ts) at its next heartbeat, so the job's next step is polled within seconds of its
// creation there too, instead of at its idle pace (minutes at 40,000 requests a month).
import { describe, expect, it } from 'vitest';
import { waitFor } from '../daemon/harness.ts';
import { clusterFixture } from './cluster-rig.ts';
import { clusteredTestsRun } from './redis-server.ts';

const TOKEN = 'successor-reports-token-0123456789';
/** Two jobs, each alpha then beta: each run's alpha is one execution, and the report of each is awaited. */
const jobOf = (key: string) => ({
  key,
  tasks: [
    { name: 'acme/alpha', type: 'SUB_WORKFLOW' },
    { name: 'acme/beta', type: 'SUB_WORKFLOW' },
  ],
});

describe.runIf(clusteredTestsRun)('a step reported on a replica that does not coordinate', () => {
  const cluster = clusterFixture();

  it("brings the job's next step's poll forward on the coordinator", async () => {
    const rig = await cluster.create({
      perSecond: 20,
      perMinute: 1_200,
      // One execution at a time on each replica: of two claimed together, each replica runs one.
      concurrency: 1,
      // The key's real month: idle polls of each task minutes apart, and no maximum interval below it.
      env: {
        DF_PIPELINE_PACING: 'true',
        DF_BUDGET_PER_MONTH: '40000',
        DF_MAX_POLL_INTERVAL_MS: '3600000',
        DF_HTTP_WAKE: 'token',
        DF_HTTP_WAKE_TOKEN: TOKEN,
      },
    });
    const jobs = ['first', 'second'].map((key) => String(rig.emulator.createJob(jobOf(key)).id));
    await Promise.all(['a', 'b'].map((name) => rig.start(name)));
    await waitFor(() => rig.coordinator() !== undefined, 'a coordinator');
    const coordinator = rig.coordinator()!;
    const other = coordinator === 'a' ? 'b' : 'a';
    await waitFor(
      () => rig.emulator.requests().filter((r) => r.operation === 'tasks.poll').length >= 3,
      'the first poll of every task',
    );
    // Each run's first step; the coordinator is woken to claim them (both, one poll after the other's hit).
    const firsts = jobs.map((jobId, n) =>
      rig.emulator.enqueueExecution('alpha', { n, ms: 1_500 }, { jobId }),
    );
    const url = rig.logsOf(coordinator).find((l) => l.msg === 'serving /metrics, /healthz and /readyz')!
      .url as string;
    const woken = await fetch(`${url}/wake?task=alpha`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(woken.status).toBe(202);
    // As the service does: a run's next step is created once the step before it ended (was reported).
    const created = new Map<string, { id: string; at: number }>();
    await waitFor(
      () => {
        firsts.forEach((first, n) => {
          if (created.has(first.id) || (rig.emulator.execution(first.id)?.reports.length ?? 0) === 0) return;
          const next = rig.emulator.enqueueExecution('beta', { n, ms: 20 }, { jobId: jobs[n]! });
          created.set(first.id, { id: next.id, at: Date.now() });
        });
        return (
          [...created.values()].every((c) => rig.emulator.execution(c.id)?.claimedAt !== undefined) &&
          created.size === firsts.length
        );
      },
      "both runs' second steps claimed",
      60_000,
    );
    const reportedOn = (id: string) =>
      rig.logsOf(other).some((l) => l.msg === 'execution reported' && l.executionId === id)
        ? other
        : coordinator;
    const waits = firsts.map((first) => {
      const next = created.get(first.id)!;
      const claimedAt = Date.parse(rig.emulator.execution(next.id)!.claimedAt!);
      return { reportedOn: reportedOn(first.id), waitMs: claimedAt - next.at };
    });
    console.log(`coordinator ${coordinator}; second steps claimed after: ${JSON.stringify(waits)}`);
    // Of two claimed together, the replica not running the first took the second.
    expect(waits.map((w) => w.reportedOn).sort()).toEqual([coordinator, other].sort());
    // The burst polls 1, 3 and 8 s after the report is heard (within a 1.5 s heartbeat on the other replica);
    // at the idle pace, beta's next poll would be minutes away.
    for (const wait of waits) expect(wait.waitMs, JSON.stringify(wait)).toBeLessThan(15_000);
  }, 90_000);
});
