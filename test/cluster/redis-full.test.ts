// Issue 28, Redis full (`maxmemory` reached, `noeviction`) just as a poll brings a claim, and the coordinator
// killed (-9) while that claim waits for Redis: the claim must not live only in the coordinator's memory. The
// coordinator reserved room for it before the poll left (ClaimRoom), and gives that room to the claim's job.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { waitFor } from '../daemon/harness.ts';
import { forwardToService } from '../faults/slow-answers-proxy.ts';
import { clusterFixture } from './cluster-rig.ts';
import { clusteredTestsRun } from './redis-server.ts';

/** In front of the emulator: once armed, fills Redis up before it passes on the first poll answer that claims. */
async function fillingProxy(
  target: string,
  fill: () => Promise<void>,
): Promise<{ server: Server; arm: () => void; filled: () => boolean }> {
  let armed = false;
  let filled = false;
  const server = createServer((incoming, outgoing) => {
    void forwardToService(new URL(target), incoming).then(
      async (answer) => {
        if (armed && !filled && answer.status === 200 && incoming.url?.endsWith('/poll')) {
          filled = true;
          await fill();
        }
        outgoing.writeHead(answer.status, answer.headers);
        outgoing.end(answer.body);
      },
      () => outgoing.destroy(),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, arm: () => (armed = true), filled: () => filled };
}

describe.runIf(clusteredTestsRun)('Redis full as a claim arrives', () => {
  const cluster = clusterFixture();
  let proxy: Server | undefined;
  let admin: Redis | undefined;
  afterAll(async () => {
    proxy?.closeAllConnections();
    await new Promise((resolve) => proxy?.close(resolve));
    admin?.disconnect();
  });

  it('coordinator kill -9 while Redis refuses writes: lost 0, each reported once, no poll while full, no 429', async () => {
    const rig = await cluster.create({ perSecond: 5, perMinute: 300, concurrency: 2 });
    admin = new Redis(cluster.redis().url);
    await admin.config('SET', 'maxmemory-policy', 'noeviction');
    const used = async () => Number(/used_memory:(\d+)/.exec(await admin!.info('memory'))![1]);
    const filling = await fillingProxy(rig.emulator.url, async () => {
      // Full: the limit just under what Redis holds now (which moves with client buffers), lowered until a
      // write is refused, so every write is refused until it is raised.
      for (let below = 8_192; ; below += 8_192) {
        await admin!.config('SET', 'maxmemory', String((await used()) - below));
        if (
          !(await admin!.set('redis-full-probe', 'x').then(
            () => true,
            () => false,
          ))
        )
          return;
      }
    });
    proxy = filling.server;
    const url = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
    await Promise.all(['a', 'b'].map((name) => rig.start(name, { DF_API_URL: url })));
    await waitFor(() => rig.coordinator() !== undefined, 'a coordinator', 10_000);
    const coordinator = rig.coordinator()!;
    rig.enqueue(6, (n) => ({ n, ms: 20 }));
    await waitFor(() => rig.figures().reported >= 2, 'work flowing', 20_000);
    filling.arm();
    rig.enqueue(6, (n) => ({ n: 100 + n, ms: 20 }));
    await waitFor(() => filling.filled(), 'a claim to meet a full Redis', 20_000);
    const pollsAt = () => rig.emulator.requests().filter((r) => r.operation === 'tasks.poll').length;
    const pollsWhenFull = pollsAt();
    // The coordinator holds the claim, retrying (before the fix), or has given it the reserved room.
    await waitFor(
      () =>
        rig
          .logsOf(coordinator)
          .some((l) => l.msg === 'cannot add the claimed execution to the queue yet; retrying') ||
        rig.logsOf(coordinator).filter((l) => l.msg === 'execution claimed and queued').length > 0,
      'the coordinator to meet the full Redis',
      10_000,
    );
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    const pollsWhileFull = pollsAt() - pollsWhenFull;
    await rig.kill(coordinator);
    await admin.config('SET', 'maxmemory', '0');
    await waitFor(() => rig.done(), 'every execution reported', 20_000).catch(() => undefined);
    const figures = rig.figures();
    const roomGiven = rig.logsOf(coordinator).filter((l) => /room reserved/.test(l.msg as string)).length;
    console.log(
      `Redis full as a claim arrived, coordinator ${coordinator} killed: ${JSON.stringify(figures)}; ` +
        `polls sent while full ${pollsWhileFull}; claims given the reserved room ${roomGiven}`,
    );
    expect(figures).toMatchObject({ claimed: 12, reported: 12, duplicated: 0, lost: 0, rateLimited: 0 });
    expect(figures.maxPerSecond).toBeLessThanOrEqual(5);
    expect(pollsWhileFull).toBe(0);
  }, 60_000);
});
