// The claim in hand of each execution (ClaimIndex) against a real Redis and BullMQ queue, and the queue journal
// that gives it up as the job's report is settled: a claim of the execution made while that job's processor is
// still returning (the service handed it out again after the report, or queued it again after a lapsed claim) is
// a new claim, queued and run, not a redelivery dropped.
import { Queue, type Job } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ClaimIndex, releaseClaim } from '../../src/clustered/claim-index.ts';
import { QueueJournal, type ExecutionJobData } from '../../src/clustered/queue-journal.ts';
import { clusteredTestsRun, RedisServer } from './redis-server.ts';

const PREFIX = 'df-test:claims';

function jobOf(id: string, executionId: string): Job<ExecutionJobData> {
  const data: ExecutionJobData = {
    taskId: 'task-1',
    taskKey: 'resize',
    executionId,
    input: {},
    createdAt: '2026-12-02T08:00:00.000Z',
    claimedAt: '2026-12-02T08:00:01.000Z',
  };
  return { id, data } as Job<ExecutionJobData>;
}

describe.runIf(clusteredTestsRun)('ClaimIndex and the queue journal', () => {
  let server: RedisServer;
  let redis: Redis;
  let queue: Queue<ExecutionJobData>;
  beforeAll(async () => {
    server = await RedisServer.start();
    redis = new Redis({ host: '127.0.0.1', port: server.port, lazyConnect: true });
    await redis.connect();
    queue = new Queue('claims', { prefix: PREFIX, connection: { host: '127.0.0.1', port: server.port } });
  });
  afterAll(async () => {
    await queue?.obliterate({ force: true });
    await queue?.close();
    redis?.disconnect();
    await server?.dispose();
  });

  it('names the job in hand until its report is settled, then no job, although its state is still waiting', async () => {
    const claims = new ClaimIndex(redis, queue, PREFIX);
    const job = jobOf('execution-1@1', 'execution-1');
    await queue.add('execution', job.data, { jobId: job.id! });
    await claims.note('execution-1', job.id!);
    expect(await claims.unfinished('execution-1')).toBe('execution-1@1');

    // Another job of the execution giving up its claim leaves this one named.
    await releaseClaim(redis, PREFIX, 'execution-1', 'execution-1@0');
    expect(await claims.unfinished('execution-1')).toBe('execution-1@1');

    const journal = new QueueJournal({
      settled: (executionId, jobId) => releaseClaim(redis, PREFIX, executionId, jobId),
    });
    await journal.attach(job);
    await journal.complete('execution-1');
    expect(await queue.getJobState(job.id!)).toBe('waiting');
    expect(await claims.unfinished('execution-1')).toBeUndefined();
    expect(journal.release('execution-1')).toEqual({ kind: 'delivered' });
  });

  it('a refused report gives up the claim too, and a later claim noted since stays named', async () => {
    const claims = new ClaimIndex(redis, queue, PREFIX);
    const first = jobOf('execution-2@1', 'execution-2');
    await queue.add('execution', first.data, { jobId: first.id! });
    await claims.note('execution-2', first.id!);
    const settled: string[] = [];
    const journal = new QueueJournal({
      settled: async (executionId, jobId) => {
        settled.push(jobId);
        await releaseClaim(redis, PREFIX, executionId, jobId);
      },
    });
    await journal.attach(first);
    await journal.deadLetter('execution-2', { status: 409, message: 'not reported in time' });
    expect(settled).toEqual(['execution-2@1']);
    expect(await claims.unfinished('execution-2')).toBeUndefined();

    // The coordinator queues the new claim and names its job; the first job's release comes after and
    // must not unname it.
    const second = jobOf('execution-2@2', 'execution-2');
    await queue.add('execution', second.data, { jobId: second.id! });
    await claims.note('execution-2', second.id!);
    await releaseClaim(redis, PREFIX, 'execution-2', first.id!);
    expect(await claims.unfinished('execution-2')).toBe('execution-2@2');
    expect(journal.release('execution-2').kind).toBe('dead-lettered');
  });

  it("holds a new claim's job on this replica until the last job of the execution is released", async () => {
    const journal = new QueueJournal();
    const first = jobOf('execution-3@1', 'execution-3');
    const second = jobOf('execution-3@2', 'execution-3');
    await journal.attach(first);
    await journal.complete('execution-3');
    let attached = false;
    const attaching = journal.attach(second).then(() => (attached = true));
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(attached).toBe(false);
    expect(journal.job('execution-3')).toBe(first);
    expect(journal.release('execution-3')).toEqual({ kind: 'delivered' });
    await attaching;
    expect(journal.job('execution-3')).toBe(second);
    expect(journal.release('execution-3')).toEqual({ kind: 'left' });
  });
});
