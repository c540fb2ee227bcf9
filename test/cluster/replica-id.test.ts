// Two real processes given one DF_REPLICA_ID: the second refuses to start while the first's heartbeat lives,
// and once the first stood still past its heartbeat and lease (SIGSTOP) and the second took over, the first,
// resumed, never polls again: one coordinator at a time. Each process reaches the emulator through a proxy of
// its own that records when it polled.
import { createServer, request, type Server } from 'node:http';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../daemon/harness.ts';
import { ClusterRig } from './cluster-rig.ts';
import { clusteredTestsRun, RedisServer } from './redis-server.ts';

const TOOK = 'took the coordinator lease: polling for the cluster';
const STOPPED = 'stopped polling for the cluster';

/** An HTTP proxy to `target` that notes the instant of each poll it forwards. */
async function pollRecorder(target: string): Promise<{ url: string; polls: number[]; server: Server }> {
  const polls: number[] = [];
  const to = new URL(target);
  const server = createServer((incoming, answer) => {
    if (incoming.url?.endsWith('/poll')) polls.push(Date.now());
    const outgoing = request(
      {
        host: to.hostname,
        port: to.port,
        method: incoming.method,
        path: incoming.url,
        headers: incoming.headers,
      },
      (reply) => {
        answer.writeHead(reply.statusCode ?? 502, reply.headers);
        reply.pipe(answer);
      },
    );
    outgoing.on('error', () => answer.destroy());
    incoming.pipe(outgoing);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (typeof address !== 'object' || !address) throw new Error('no port');
  return { url: `http://127.0.0.1:${address.port}`, polls, server };
}

describe.runIf(clusteredTestsRun)(
  'two processes given one DF_REPLICA_ID (real processes, real Redis)',
  () => {
    let redis: RedisServer;
    let rig: ClusterRig | undefined;
    const servers: Server[] = [];

    beforeAll(async () => {
      redis = await RedisServer.start();
    });
    afterEach(async () => {
      await rig?.dispose();
      rig = undefined;
      for (const server of servers.splice(0)) server.close();
    });
    afterAll(async () => {
      await redis?.dispose();
    });

    it('the second refuses to start while the first beats, with an error naming DF_REPLICA_ID', async () => {
      rig = await ClusterRig.create({ redis, perSecond: 5, perMinute: 300 });
      await rig.start('first', { DF_REPLICA_ID: 'same' });
      const refused = await rig.start('second', { DF_REPLICA_ID: 'same' }).catch((error: unknown) => error);
      expect(refused).toBeInstanceOf(Error);
      const second = rig.daemons.get('second')!;
      expect((await second.exited).code).not.toBe(0);
      expect(second.stderr()).toContain('error DFW_REPLICA_ID_IN_USE');
      expect(second.stderr()).toContain('DF_REPLICA_ID=same');
      // The first still holds its id and polls.
      expect(rig.coordinator()).toBe('first');
      expect(rig.daemons.get('first')!.child.exitCode).toBeNull();
    }, 60_000);

    it('the holder frozen 8 s (SIGSTOP): the second takes over, and the first, resumed, never polls again', async () => {
      rig = await ClusterRig.create({ redis, perSecond: 5, perMinute: 300 });
      const proxies = {
        first: await pollRecorder(rig.emulator.url),
        second: await pollRecorder(rig.emulator.url),
      };
      servers.push(proxies.first.server, proxies.second.server);
      const first = await rig.start('first', { DF_REPLICA_ID: 'same', DF_API_URL: proxies.first.url });
      await waitFor(() => rig!.coordinator() === 'first', 'first to coordinate', 15_000);
      await waitFor(() => proxies.first.polls.length > 0, 'first to poll', 10_000);
      first.child.kill('SIGSTOP');
      const frozenAt = Date.now();
      // Started while the first stands still: it waits for the first's heartbeat to lapse, then runs.
      const second = await rig.start('second', { DF_REPLICA_ID: 'same', DF_API_URL: proxies.second.url });
      await waitFor(() => second.logs().some((l) => l.msg === TOOK), 'second to take the lease', 15_000);
      const tookAt = Date.now();
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, frozenAt + 8_000 - Date.now())));
      first.child.kill('SIGCONT');
      const resumedAt = Date.now();
      // Not given up in time (both coordinate): the figures below say so.
      await waitFor(() => first.logs().some((l) => l.msg === STOPPED), 'first to stop polling', 10_000).catch(
        () => undefined,
      );
      // Work arrives after the resume: only the coordinator polls for it.
      rig.enqueue(6);
      await new Promise((resolve) => setTimeout(resolve, 4_000));
      const firstAfter = proxies.first.polls.filter((at) => at > resumedAt);
      const secondAfter = proxies.second.polls.filter((at) => at > resumedAt);
      console.log(
        `first frozen ${resumedAt - frozenAt} ms; second took the lease ${tookAt - frozenAt} ms into the freeze; ` +
          `after the resume: first polled ${firstAfter.length} times (at ${firstAfter.map((at) => at - resumedAt).join(', ')} ms), ` +
          `second ${secondAfter.length} times; first logged '${STOPPED}': ${first.logs().some((l) => l.msg === STOPPED)}`,
      );
      // A poll the first had let through just before it froze may still leave as it resumes; none after.
      expect(firstAfter.filter((at) => at > resumedAt + 1_000)).toEqual([]);
      expect(firstAfter.length).toBeLessThanOrEqual(1);
      expect(secondAfter.length).toBeGreaterThan(0);
      expect(first.logs().some((l) => l.msg === STOPPED)).toBe(true);
      expect(second.logs().findLast((l) => l.msg === TOOK || l.msg === STOPPED)?.msg).toBe(TOOK);
      // The first, resumed, sees its id taken over and says so; it does not take the heartbeat back.
      expect(first.logs().some((l) => l.code === 'DFW_REPLICA_ID_IN_USE')).toBe(true);
    }, 90_000);
  },
);
