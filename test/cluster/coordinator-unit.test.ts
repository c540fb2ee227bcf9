// The coordinator on the manual clock, with its lease and queue on a real redis-server on loopback and the
// emulator answering in process: it takes a free lease and polls, renews it every LEASE_RENEW_MS of clock
// time, ends its term when the lease is lost (taken, or Redis gone), gives it back on stop, and claims only
// while the cluster has room. The only waits are for Redis's answers, each bounded.
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { RequestGate } from '../../src/api/client.ts';
import { ManualClock } from '../../src/clock/manual-clock.ts';
import { Coordinator, type ProfileStore } from '../../src/clustered/coordinator.ts';
import { CoordinatorLease, LEASE_RENEW_MS, LEASE_TTL_MS } from '../../src/clustered/coordinator-lease.ts';
import type { ExecutionJobData } from '../../src/clustered/queue-journal.ts';
import { bullConnectionOptions, connectRedis } from '../../src/clustered/redis.ts';
import { pollLoopOn } from '../../src/daemon/core.ts';
import { WorkerEvents } from '../../src/events/worker-events.ts';
import { Emulator } from '../../src/emulator/index.ts';
import { PollPlanner } from '../../src/scheduler/poll-planner.ts';
import { serviceOnClock, turn } from '../clock/virtual-time.ts';
import { clusteredTestsRun, RedisServer } from './redis-server.ts';

const KEY = 'coordinator-unit-key';
const START = Date.UTC(2026, 10, 27, 12);

/** Waits for `check` to hold, checking after each turn of the event loop (a Redis round trip at most). */
async function eventually(
  check: () => boolean | Promise<boolean>,
  what: string,
  timeoutMs = 5_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await turn();
  }
}

describe.runIf(clusteredTestsRun)('Coordinator', () => {
  let server: RedisServer;
  let redis: Redis;
  let n = 0;
  const cleanups: (() => Promise<void> | void)[] = [];

  beforeAll(async () => {
    server = await RedisServer.start();
    redis = connectRedis(server.url);
    await redis.connect();
  });
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });
  afterAll(async () => {
    redis?.disconnect();
    await server?.dispose();
  });

  /** One cluster: its lease key, its queue and the service its coordinators poll (in process). */
  async function cluster() {
    n++;
    const clock = new ManualClock(START);
    const emulator = new Emulator({
      clock,
      apiKeys: [KEY],
      limits: { perSecond: 0, perMinute: 0, perMonth: 0 },
    });
    const task = emulator.createTask({ key: 'clustered' });
    const leaseKey = `unit:lease:${n}`;
    const queueName = `executions${n}`;
    const queue = new Queue<ExecutionJobData>(queueName, {
      prefix: 'unit',
      connection: {
        ...bullConnectionOptions(server.url),
        maxRetriesPerRequest: 1,
        enableOfflineQueue: false,
      },
    });
    queue.on('error', () => undefined);
    await queue.waitUntilReady();
    cleanups.push(async () => {
      await queue.obliterate({ force: true }).catch(() => undefined);
      await queue.close();
    });
    const polls = () => emulator.requests().filter((r) => r.operation === 'tasks.poll').length;

    /** A replica's coordinator, on its own Redis connection, sharing the cluster's clock. */
    async function replica(
      id: string,
      options: {
        capacity?: () => number;
        profiles?: ProfileStore;
        gate?: RequestGate;
        taskConcurrency?: (taskKey: string) => number | undefined;
      } = {},
    ) {
      const connection = connectRedis(server.url);
      await connection.connect();
      cleanups.push(() => connection.disconnect());
      const { budget, client } = serviceOnClock(emulator, clock, {
        apiKey: KEY,
        limits: { perSecond: 10, perMinute: 600, perMonth: 1_000_000 },
      });
      const planner = new PollPlanner({
        budget,
        maxPollIntervalMs: 60_000,
        errorBackoff: { baseMs: 100, maxMs: 1_000 },
      });
      planner.setTasks([{ id: task.id, key: task.key }], clock.now());
      const stop = new AbortController();
      const events = new WorkerEvents();
      const leases: string[] = [];
      events.on('lease', ({ held, reason }) => leases.push(held ? 'held' : `lost: ${reason}`));
      const coordinator = new Coordinator({
        lease: new CoordinatorLease(connection, leaseKey, id),
        queue,
        client,
        gate: options.gate ?? budget,
        planner,
        clock,
        logger: pino({ level: 'silent' }),
        events,
        backoff: { baseMs: 100, maxMs: 1_000 },
        pollLoop: pollLoopOn({
          clock,
          logger: pino({ level: 'silent' }),
          events,
          unauthorizedRetryMs: 60_000,
        }),
        capacity: options.capacity ?? (() => 4),
        claimBlocker: () => (connection.status === 'ready' ? undefined : 'Redis is not reachable'),
        exitSignal: stop.signal,
        ...(options.profiles ? { profiles: options.profiles } : {}),
        ...(options.taskConcurrency ? { taskConcurrency: options.taskConcurrency } : {}),
      });
      const running = coordinator.run(stop.signal);
      const halt = async () => {
        stop.abort(new Error('replica stops'));
        await running;
      };
      cleanups.push(halt);
      return { coordinator, connection, halt, leases, events };
    }

    /** Moves the clock one lease period on, and lets the renewals it starts reach Redis and come back. */
    async function renewalPeriod(): Promise<void> {
      await clock.advance(LEASE_RENEW_MS);
      await redis.ping();
      for (let i = 0; i < 5; i++) await turn();
    }

    const job = async (executionId: string) =>
      (await queue.getJobs()).find((j) => j?.data.executionId === executionId);
    return { clock, emulator, task, leaseKey, queue, polls, replica, renewalPeriod, job };
  }

  it('takes a free lease, then polls for the cluster and queues each claim under its execution id and claim instant', async () => {
    const c = await cluster();
    const a = await c.replica('a');
    await eventually(() => a.coordinator.coordinating, 'a to take the lease');
    expect(await redis.get(c.leaseKey)).toMatch(/^a\//);
    const pttl = await redis.pttl(c.leaseKey);
    expect(pttl).toBeGreaterThan(0);
    expect(pttl).toBeLessThanOrEqual(LEASE_TTL_MS);

    const queued = c.emulator.enqueueExecution(c.task.id, { n: 1 });
    expect(a.coordinator.wake()).toBe(1);
    await eventually(async () => (await c.job(queued.id)) !== undefined, 'the claim in the queue');
    const job = await c.job(queued.id);
    expect(job?.id).toMatch(new RegExp(`^${queued.id}@\\d+$`));
    expect(job?.data).toMatchObject({
      executionId: queued.id,
      taskId: c.task.id,
      taskKey: 'clustered',
      input: { n: 1 },
    });
    expect(c.emulator.execution(queued.id)?.status).toBe('IN_PROGRESS');
  });

  it('renews its lease every LEASE_RENEW_MS of clock time, and a second replica waits without polling', async () => {
    const c = await cluster();
    const a = await c.replica('a');
    await eventually(() => a.coordinator.coordinating, 'a to take the lease');
    const b = await c.replica('b');
    for (let i = 0; i < 4; i++) {
      // Shorten the TTL: only a renewal brings it back to LEASE_TTL_MS.
      await redis.pexpire(c.leaseKey, 3_000);
      await c.renewalPeriod();
      await eventually(async () => (await redis.pttl(c.leaseKey)) > 3_000, `renewal ${i + 1}`);
      expect(await redis.get(c.leaseKey)).toMatch(/^a\//);
      expect(a.coordinator.coordinating).toBe(true);
      expect(b.coordinator.coordinating).toBe(false);
    }
    expect(b.coordinator.wake()).toBe(0);
  });

  it('ends its term when the lease is taken from it, stops polling, and leaves the new holder its lease', async () => {
    const c = await cluster();
    const a = await c.replica('a');
    await eventually(() => a.coordinator.coordinating, 'a to take the lease');
    // As if a's lease had expired while it stalled, and another replica took it.
    await redis.set(c.leaseKey, 'b', 'PX', 60_000);
    await c.renewalPeriod();
    await eventually(() => !a.coordinator.coordinating, 'a to end its term');
    const polled = c.polls();
    c.emulator.enqueueExecution(c.task.id, {});
    expect(a.coordinator.wake()).toBe(0);
    for (let i = 0; i < 5; i++) await c.renewalPeriod();
    expect(c.polls()).toBe(polled);
    await a.halt();
    expect(await redis.get(c.leaseKey)).toBe('b');
    expect(a.leases).toEqual(['held', 'lost: lost the coordinator lease']);
  });

  it('drops a poll that waited in the budget while its term ended (a stall): it never leaves', async () => {
    const c = await cluster();
    // A budget that holds the poll as a stalled process would, and lets it through once told.
    let letThrough: () => void = () => undefined;
    const held = new Promise<void>((resolve) => (letThrough = resolve));
    let waiting = 0;
    const gate: RequestGate = {
      acquire: async () => {
        waiting++;
        await held;
      },
    };
    const a = await c.replica('a', { gate });
    const fenced: string[] = [];
    a.events.on('fenced', ({ request }) => fenced.push(request));
    await eventually(() => a.coordinator.coordinating, 'a to take the lease');
    c.emulator.enqueueExecution(c.task.id, {});
    a.coordinator.wake();
    await eventually(() => waiting === 1, 'the poll to wait in the budget');
    await redis.set(c.leaseKey, 'b', 'PX', 60_000);
    await c.renewalPeriod();
    letThrough();
    await eventually(() => fenced.length === 1, 'the poll to be dropped');
    await eventually(() => !a.coordinator.coordinating, 'a to end its term');
    expect(c.polls()).toBe(0);
    expect(fenced).toEqual(['poll']);
  });

  it('counts a Redis that does not answer as a lost lease, and ends its term', async () => {
    const c = await cluster();
    const a = await c.replica('a');
    await eventually(() => a.coordinator.coordinating, 'a to take the lease');
    a.connection.disconnect();
    await c.renewalPeriod();
    await eventually(() => !a.coordinator.coordinating, 'a to end its term');
  });

  it('gives the lease back on stop, and another replica takes it at its next try and polls', async () => {
    const c = await cluster();
    const a = await c.replica('a');
    await eventually(() => a.coordinator.coordinating, 'a to take the lease');
    const b = await c.replica('b');
    await c.renewalPeriod();
    expect(b.coordinator.coordinating).toBe(false);
    await a.halt();
    expect(a.coordinator.coordinating).toBe(false);
    expect(a.leases).toEqual(['held', 'lost: stopping']);
    expect(await redis.get(c.leaseKey)).toBeNull();
    const queued = c.emulator.enqueueExecution(c.task.id, {});
    await c.renewalPeriod();
    await eventually(() => b.coordinator.coordinating, 'b to take the lease');
    expect(await redis.get(c.leaseKey)).toMatch(/^b\//);
    b.coordinator.wake();
    await eventually(async () => (await c.job(queued.id)) !== undefined, "b's claim in the queue");
  });

  it('claims nothing while the queue holds as many executions as the cluster runs, then claims again', async () => {
    const c = await cluster();
    await c.queue.add('execution', { executionId: 'earlier' } as ExecutionJobData, { jobId: 'earlier' });
    const a = await c.replica('a', { capacity: () => 1 });
    await eventually(() => a.coordinator.coordinating, 'a to take the lease');
    const queued = c.emulator.enqueueExecution(c.task.id, {});
    a.coordinator.wake();
    for (let i = 0; i < 4; i++) await c.renewalPeriod();
    expect(c.polls()).toBe(0);
    await (await c.job('earlier'))!.remove();
    await eventually(async () => {
      await c.clock.advance(200);
      return (await c.job(queued.id)) !== undefined;
    }, 'the claim once the queue had room');
    expect(c.polls()).toBeGreaterThanOrEqual(1);
  });

  it("keeps a task's executions queued or running within its concurrency, and polls it again once one ends", async () => {
    const c = await cluster();
    const a = await c.replica('a', { capacity: () => 4, taskConcurrency: () => 2 });
    await eventually(() => a.coordinator.coordinating, 'a to take the lease');
    const pending: string[] = [1, 2, 3, 4].map((n) => c.emulator.enqueueExecution(c.task.id, { n }).id);
    a.coordinator.wake();
    const queuedIds = async () =>
      (await c.queue.getJobs(['waiting', 'active'])).map((j) => j.data.executionId).filter(Boolean);
    await eventually(async () => {
      await c.clock.advance(200);
      return (await queuedIds()).length === 2;
    }, 'two claims in the queue');
    // The cluster has room for two more, but the task is at its concurrency: it is not polled.
    const pollsAtCap = c.polls();
    for (let i = 0; i < 4; i++) await c.renewalPeriod();
    expect(c.polls()).toBe(pollsAtCap);
    expect(await queuedIds()).toHaveLength(2);
    // One ends (its job leaves the queue): the next look lets the task be polled, and a third is claimed.
    const [ended, kept] = await queuedIds();
    await (await c.job(ended!))!.remove();
    await eventually(async () => {
      await c.clock.advance(200);
      return (await queuedIds()).length === 2;
    }, 'a third claim once one of the two ended');
    const now = await queuedIds();
    expect(now).toContain(kept);
    expect(now).not.toContain(ended);
    expect(pending).toContain(now.find((id) => id !== kept));
    expect(c.polls()).toBeGreaterThan(pollsAtCap);
  });

  it('adopts the arrival profile as its term starts and saves it when it stops holding the lease', async () => {
    const c = await cluster();
    const calls: string[] = [];
    let saved: unknown;
    const profiles: ProfileStore = {
      load: () => {
        calls.push('load');
        return Promise.resolve(undefined);
      },
      save: (state) => {
        calls.push('save');
        saved = state;
        return Promise.resolve();
      },
    };
    const a = await c.replica('a', { profiles });
    await eventually(() => a.coordinator.coordinating, 'a to take the lease');
    expect(calls).toEqual(['load']);
    await a.halt();
    expect(calls).toEqual(['load', 'save']);
    expect(saved).toBeTypeOf('object');
  });

  it('does not save the profile when it stops after losing the lease (the next holder may be ahead)', async () => {
    const c = await cluster();
    const calls: string[] = [];
    const profiles: ProfileStore = {
      load: () => Promise.resolve(void calls.push('load')),
      save: () => Promise.resolve(void calls.push('save')),
    };
    const a = await c.replica('a', { profiles });
    await eventually(() => a.coordinator.coordinating, 'a to take the lease');
    await redis.set(c.leaseKey, 'b', 'PX', 60_000);
    await c.renewalPeriod();
    await eventually(() => !a.coordinator.coordinating, 'a to end its term');
    await a.halt();
    expect(calls).toEqual(['load']);
  });

  // The coordinator learns that its lease is gone only at its next renewal: a replica whose process stood still
  // past LEASE_TTL_MS (a long GC or event-loop stall, a suspended VM) resumes as coordinator although, by its own
  // clock, its lease has expired and another replica may hold it. Its claims are fenced by the age of its last
  // renewal (STYLE.md: "a process that may have lost ownership checks before it acts on the outside world").
  it('claims nothing once its last renewal is older than LEASE_TTL_MS, until it renews', async () => {
    const c = await cluster();
    const a = await c.replica('a');
    await eventually(() => a.coordinator.coordinating, 'a to take the lease');
    await redis.ping();
    // a stands still past its lease's TTL: no timer of its runs; meanwhile the lease expires and b takes it.
    c.clock.set(c.clock.now() + LEASE_TTL_MS + 1_000);
    await redis.set(c.leaseKey, 'b', 'PX', 60_000);
    const polled = c.polls();
    c.emulator.enqueueExecution(c.task.id, {});
    a.coordinator.wake();
    for (let i = 0; i < 10; i++) await turn();
    await redis.ping();
    expect(c.polls()).toBe(polled);
  });
});
