// How reports end when the service does not simply answer 200: an answer of the wrong shape, an output the
// service refuses, a report an earlier run already applied; and what a replay leaves in the metrics.
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { JsonObject, TaskExecution } from '../../src/api/types.ts';
import { Journal } from '../../src/journal/journal.ts';
import { startHarness, TEST_KEY, waitFor, type Harness } from './harness.ts';

let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

const reported = (h: Harness, id: string) => h.emulator.executions().find((e) => e.id === id)?.reports ?? [];
const quiet = { warn: () => undefined };

/** What a killed earlier run left: the execution claimed on the service and its record in the journal. */
async function leftByEarlierRun(
  h: Harness,
  taskKey: string,
  input: JsonObject,
  outcome?: JsonObject,
): Promise<TaskExecution> {
  const queued = h.emulator.enqueueExecution(taskKey, input);
  const answer = await fetch(`${h.emulator.url}/v1/data-factory/tasks/${queued.taskId}/poll`, {
    headers: { 'x-api-key': TEST_KEY },
  });
  const execution = (await answer.json()) as TaskExecution;
  expect(execution.id).toBe(queued.id);
  const journal = await Journal.open(h.stateDir, { logger: quiet });
  const claimedAt = new Date().toISOString();
  await journal.recordClaim(
    { executionId: execution.id, taskId: execution.taskId, taskKey, input: execution.input, claimedAt },
    outcome && { status: 'COMPLETED', output: outcome, attempts: 1, finishedAt: claimedAt },
  );
  await keepEarlierRunsBudget(h);
  return execution;
}

/**
 * The run that claimed it kept its budget too: a journal without budget.json is lost state (a minute's wait).
 * Its sends are every request the emulator saw so far: a file that left them out would have the daemon start
 * on a window the key has already used, and take the 429 that follows for the service's.
 */
async function keepEarlierRunsBudget(h: Harness): Promise<void> {
  const sentAt = h.emulator.requests().map((r) => r.at);
  await writeFile(
    join(h.stateDir, 'budget.json'),
    JSON.stringify({ monthKey: new Date().toISOString().slice(0, 7), used: 100, sentAt }),
  );
}

const journalFiles = async (h: Harness) =>
  (await readdir(join(h.stateDir, 'journal'))).filter((f) => !f.startsWith('.'));

async function deadLetters(
  h: Harness,
): Promise<{ entry: { outcome?: { output: JsonObject } }; answer: { status: number; message?: string } }[]> {
  const dir = join(h.stateDir, 'dead-letter');
  // Only finished letters: a temp file being written is `.<name>.<pid>.<random>.tmp`.
  const files = (await readdir(dir)).filter((f) => !f.startsWith('.'));
  return Promise.all(files.map(async (f) => JSON.parse(await readFile(join(dir, f), 'utf8')) as never));
}

describe('reports', () => {
  it('counts a 2xx answer of an unexpected shape as delivered, not as a refusal', async () => {
    harness = await startHarness({ handlers: [{ key: 'echo', handle: (i) => i }] });
    const { emulator, worker } = harness;
    emulator.setFaults([
      {
        operation: 'executions.report',
        kind: 'status',
        status: 200,
        body: '{}',
        contentType: 'application/json',
        count: 1,
      },
    ]);
    emulator.enqueueExecution('echo', { n: 1 });
    worker.wake();
    await waitFor(() => harness!.logs.some((l) => l.msg === 'execution reported'), 'the report');
    expect(
      harness.logs.some((l) => l.msg === 'report accepted, but the answer is not the documented shape'),
    ).toBe(true);
    expect(await deadLetters(harness)).toEqual([]);
    expect(await journalFiles(harness)).toEqual([]);
  });

  it('reports FAILED, naming the refusal, an execution whose output the service refuses (413), and keeps the output in a dead letter', async () => {
    const blob = 'x'.repeat(11 * 1024 * 1024); // over a 10 MiB body limit, as a proxy in front may have
    harness = await startHarness({
      emulator: { maxUploadBytes: 10 * 1024 * 1024 },
      handlers: [{ key: 'big', outputKeys: ['blob'], handle: () => ({ blob }) }],
      // Past the daemon's own output limit too, so that the service is what refuses it.
      settings: { 'handlers.maxOutputBytes': 16 * 2 ** 20 },
    });
    const { emulator, worker } = harness;
    const e = emulator.enqueueExecution('big', {});
    worker.wake();
    await waitFor(() => reported(harness!, e.id).length > 0, 'the FAILED report', 15_000);
    const [report] = reported(harness, e.id);
    expect(report).toMatchObject({ status: 'FAILED', output: { refusedStatus: 413 } });
    expect(report!.output.error).toMatch(/^the service refused the handler's output \(413\)/);
    let letters: Awaited<ReturnType<typeof deadLetters>> = [];
    await waitFor(() => {
      void deadLetters(harness!).then((found) => (letters = found));
      return letters.length === 1;
    }, 'the dead letter');
    const [letter] = letters;
    expect(letter!.answer.status).toBe(413);
    expect(letter!.answer.message).toMatch(/df-worker reported the execution FAILED instead$/);
    expect(letter!.entry.outcome?.output.blob).toHaveLength(blob.length);
  });

  it('treats a replayed report the service refuses as delivered when the service already holds that status', async () => {
    harness = await startHarness({ handlers: [{ key: 'echo', handle: (i) => i }], start: false });
    const { emulator, worker } = harness;
    const execution = await leftByEarlierRun(harness, 'echo', { n: 1 }, { n: 1 });
    // The earlier run's PATCH was applied, then it was killed before it removed the record.
    const patched = await fetch(`${emulator.url}/v1/data-factory/task-executions/${execution.id}`, {
      method: 'PATCH',
      headers: { 'x-api-key': TEST_KEY, 'content-type': 'application/json' },
      body: JSON.stringify({ id: execution.id, status: 'COMPLETED', output: { n: 1 } }),
    });
    expect(patched.status).toBe(200);
    await keepEarlierRunsBudget(harness);
    emulator.setFaults([{ operation: 'executions.report', kind: 'status', status: 400, count: 1 }]);
    await worker.start();
    // The replay runs beside polling once start() resolved.
    await waitFor(() => harness!.logs.some((l) => l.msg === 'execution reported'), 'the replayed report');
    expect(await journalFiles(harness)).toEqual([]);
    expect(await deadLetters(harness)).toEqual([]);
    expect(emulator.requests().filter((r) => r.operation === 'executions.get')).toHaveLength(1);
  });

  it('counts failed report attempts in the journal while a report is stuck', async () => {
    harness = await startHarness({ handlers: [{ key: 'echo', handle: (i) => i }] });
    const { emulator, worker } = harness;
    emulator.setFaults([{ operation: 'executions.report', kind: 'status', status: 503 }]);
    const e = emulator.enqueueExecution('echo', { n: 1 });
    worker.wake();
    const journal = await Journal.open(harness.stateDir, { logger: quiet });
    let attempts = 0;
    await waitFor(() => {
      void journal.pending().then((p) => (attempts = p[0]?.reportAttempts ?? 0));
      return attempts >= 2;
    }, 'two counted attempts');
    emulator.clearFaults();
    await waitFor(() => reported(harness!, e.id).length > 0, 'the report');
  });

  it('leaves the in-flight gauge at 0 after replaying the journal', async () => {
    harness = await startHarness({ handlers: [{ key: 'echo', handle: (i) => i }], start: false });
    const finished = await leftByEarlierRun(harness, 'echo', { n: 1 }, { n: 1 });
    const running = await leftByEarlierRun(harness, 'echo', { n: 2 });
    await harness.worker.start();
    // The replay runs beside polling once start() resolved.
    await waitFor(
      () => harness!.logs.filter((l) => l.msg === 'execution reported').length === 2,
      'both replayed reports',
    );
    expect(reported(harness, finished.id)).toHaveLength(1);
    expect(reported(harness, running.id)).toHaveLength(1);
    expect(await journalFiles(harness)).toEqual([]);
    expect(await harness.worker.metrics.render()).toMatch(/^dfworker_executions_in_flight 0$/m);
  });
});

describe('stopping while the journal is replayed', () => {
  it('gives the replayed handler the grace period, reports it, and start() ends without polling', async () => {
    harness = await startHarness({
      settings: { shutdownGraceMs: 30_000 },
      handlers: [
        {
          key: 'slow',
          handle: (input, ctx) =>
            new Promise<JsonObject>((resolve, reject) => {
              const timer = setTimeout(() => resolve({ done: input.n ?? null }), 600);
              ctx.signal.addEventListener('abort', () => {
                clearTimeout(timer);
                reject(new Error('aborted'));
              });
            }),
        },
      ],
      start: false,
    });
    const { worker } = harness;
    const execution = await leftByEarlierRun(harness, 'slow', { n: 3 });
    const started = worker.start();
    await waitFor(
      () =>
        harness!.logs.some(
          (l) => l.msg === 'execution was running when the worker stopped; running it again',
        ),
      'the replay',
    );
    // No poll leaves once stop() was called. One sent just before may still reach the emulator after (a
    // loaded machine showed it): each poll is dated by when it left, from the daemon's own 'response' events.
    const pollsSent: number[] = [];
    worker.events.on('response', (e) => {
      if (e.operation === 'tasks.poll') pollsSent.push(Date.now() - e.durationMs);
    });
    const stopCalledAt = Date.now();
    await worker.stop();
    await started;
    expect(worker.state).toBe('stopped');
    expect(reported(harness, execution.id)).toEqual([expect.objectContaining({ status: 'COMPLETED' })]);
    expect(pollsSent.filter((at) => at > stopCalledAt)).toEqual([]);
    expect(await journalFiles(harness)).toEqual([]);
  });
});
