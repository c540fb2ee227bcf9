// A poll answer the daemon cannot run (its input is not an object) still names the execution it claimed:
// the worker reports it FAILED instead of leaving its job waiting, and never runs the handler.
import { existsSync, readdirSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ServiceClient } from '../../src/api/client.ts';
import type { DeadLetter } from '../../src/journal/journal.ts';
import { startHarness, TEST_KEY, waitFor, type Harness } from './harness.ts';

let harness: Harness | undefined;
const clients: ServiceClient[] = [];
afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close()));
  await harness?.close();
  harness = undefined;
});

const reported = (h: Harness, id: string) => h.emulator.executions().find((e) => e.id === id)?.reports ?? [];
/** The worker removes a record (or moves it to dead letters) only after the service's answer: wait for it. */
const journalEmpty = (h: Harness) => readdirSync(join(h.stateDir, 'journal')).length === 0;

/** A worker for task `enrich`, not started yet, counting its handler's calls, with a client of its key. */
async function enrichWorker(): Promise<{
  h: Harness;
  taskId: string;
  client: ServiceClient;
  calls: () => number;
}> {
  let calls = 0;
  const h = await startHarness({
    start: false,
    handlers: [
      {
        key: 'enrich',
        inputKeys: ['sku'],
        outputKeys: ['title'],
        handle: (input) => {
          calls++;
          return { title: `T-${String(input.sku)}` };
        },
      },
    ],
  });
  harness = h;
  const client = new ServiceClient({ baseUrl: h.emulator.url, apiKey: TEST_KEY });
  clients.push(client);
  const [task] = await client.listTasks();
  return { h, taskId: task!.id, client, calls: () => calls };
}

/** The worker's next poll of `taskId` gets `execution` with `input` replaced by a string. */
function answerNextPollWithStringInput(h: Harness, taskId: string, execution: object): void {
  h.emulator.setFaults([
    {
      operation: 'tasks.poll',
      taskId,
      kind: 'status',
      status: 200,
      body: JSON.stringify({ ...execution, input: 'oops' }),
      contentType: 'application/json',
      count: 1,
    },
  ]);
}

describe('a poll answer whose input is not an object', () => {
  it('is reported FAILED naming the problem, without running the handler, and polling goes on', async () => {
    const { h, taskId, client, calls } = await enrichWorker();
    // Claimed out of band, so the bad answer names an execution the service really handed out.
    h.emulator.enqueueExecution(taskId, { sku: 'A' });
    const claimed = await client.pollTask(taskId);
    expect(claimed).not.toBeNull();
    answerNextPollWithStringInput(h, taskId, claimed!);

    await h.worker.start();
    await waitFor(() => reported(h, claimed!.id).length > 0, 'the report of the unusable execution');
    expect(reported(h, claimed!.id)).toEqual([
      {
        at: expect.any(String) as unknown,
        status: 'FAILED',
        output: {
          error: expect.stringContaining("field 'input' is not an object") as unknown,
          message: expect.stringContaining("field 'input' is not an object") as unknown,
        },
      },
    ]);
    expect(calls()).toBe(0);

    const next = h.emulator.enqueueExecution('enrich', { sku: 'B' });
    h.worker.wake();
    await waitFor(() => reported(h, next.id).length > 0, 'the report of the next execution');
    expect(reported(h, next.id)).toMatchObject([{ status: 'COMPLETED', output: { title: 'T-B' } }]);
    await waitFor(() => journalEmpty(h), 'both records removed from the journal');
  });

  it('is dead-lettered with its FAILED outcome when the service refuses the report (404)', async () => {
    const { h, taskId, calls } = await enrichWorker();
    answerNextPollWithStringInput(h, taskId, {
      object: 'task_execution',
      id: 'x-1',
      taskId,
      status: 'IN_PROGRESS',
      createdAt: new Date().toISOString(),
    });

    await h.worker.start();
    const deadLetterDir = join(h.stateDir, 'dead-letter');
    // The letter is written before the record is removed: wait for both steps of the move.
    await waitFor(
      () => existsSync(deadLetterDir) && readdirSync(deadLetterDir).length > 0 && journalEmpty(h),
      'the record moved to the dead-letter folder',
    );
    const [file] = await readdir(deadLetterDir);
    const letter = JSON.parse(await readFile(join(deadLetterDir, file!), 'utf8')) as DeadLetter;
    expect(letter).toMatchObject({
      entry: {
        executionId: 'x-1',
        taskId,
        taskKey: 'enrich',
        phase: 'finished',
        outcome: {
          status: 'FAILED',
          output: { error: expect.stringContaining("field 'input' is not an object") as unknown },
        },
      },
      answer: { status: 404, code: 'NOT_FOUND' },
    });
    expect(calls()).toBe(0);
  });
});
