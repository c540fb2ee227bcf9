// The emulator's response timeout (a setting and a fault rule), driven by its clock: a claim not reported in
// time is timed out and queued again, as a new execution or under the same id, and its late report is refused.
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock/manual-clock.ts';
import type { Emulator, EmulatorOptions } from '../../src/emulator/index.ts';
import { call, envelope, startEmulator } from './helpers.ts';

const UNLIMITED = { perSecond: 0, perMinute: 0, perMonth: 0 };
let emulator: Emulator;
let clock: ManualClock;

async function start(options: EmulatorOptions = {}): Promise<string> {
  clock = new ManualClock();
  emulator = await startEmulator({ limits: UNLIMITED, clock, ...options });
  return emulator.createTask({ key: 'digest' }).id;
}
afterEach(() => emulator.close());

const poll = (taskId: string) => call(emulator, 'GET', `/v1/data-factory/tasks/${taskId}/poll`);
const report = (id: string) =>
  call(emulator, 'PATCH', `/v1/data-factory/task-executions/${id}`, {
    body: { id, status: 'COMPLETED', output: { done: true } },
  });
const idOf = (reply: { json: unknown }) => (reply.json as { id: string }).id;

describe('response timeout, new-execution mode (the setting)', () => {
  it('times the claim out, queues a copy with a new id and the same input, and refuses the late report with 409', async () => {
    const taskId = await start({ responseTimeouts: { digest: { ms: 10_000 } } });
    const queued = emulator.enqueueExecution('digest', { text: 'a' });
    expect(idOf(await poll(taskId))).toBe(queued.id);
    await clock.advance(9_999);
    expect((await poll(taskId)).status).toBe(404);
    await clock.advance(1);

    const copy = await poll(taskId);
    expect(copy.status).toBe(200);
    expect(idOf(copy)).not.toBe(queued.id);
    expect((copy.json as { input: unknown }).input).toEqual(queued.input);

    const late = await report(queued.id);
    expect(late.status).toBe(409);
    expect(late.json).toEqual(envelope(409, 'CONFLICT'));
    expect((late.json as { message: string }).message).toContain(`queued again as '${idOf(copy)}'`);
    expect((await call(emulator, 'GET', `/v1/data-factory/task-executions/${queued.id}`)).json).toMatchObject(
      {
        status: 'TIMED_OUT',
      },
    );
    expect((await report(idOf(copy))).status).toBe(200);
    const old = emulator.execution(queued.id)!;
    expect(old.reports).toEqual([]);
    expect(old.timeouts).toEqual([
      { at: new Date(clock.now()).toISOString(), claimedAt: old.claimedAt, requeuedAs: idOf(copy) },
    ]);
    expect(emulator.execution(idOf(copy))).toMatchObject({ requeuedFrom: queued.id, status: 'COMPLETED' });
  });

  it('leaves a claim reported in time alone, and times out nothing of a task without a timeout', async () => {
    const taskId = await start({ responseTimeouts: { digest: { ms: 1_000 } } });
    const other = emulator.createTask({ key: 'other' }).id;
    const a = emulator.enqueueExecution('digest');
    const b = emulator.enqueueExecution('other');
    await poll(taskId);
    await poll(other);
    await clock.advance(999);
    expect((await report(a.id)).status).toBe(200);
    await clock.advance(60_000);
    expect((await report(b.id)).status).toBe(200);
    expect(emulator.executions().map((e) => e.status)).toEqual(['COMPLETED', 'COMPLETED']);
  });
});

describe('response timeout, same-id mode (a fault rule)', () => {
  it('queues the same id again: refused while it waits, claimed again, then reported once', async () => {
    const taskId = await start();
    emulator.setFaults([{ kind: 'responseTimeout', ms: 5_000, requeue: 'same-id', taskId, count: 1 }]);
    const queued = emulator.enqueueExecution('digest');
    await poll(taskId);
    await clock.advance(5_000);

    const late = await report(queued.id);
    expect(late.status).toBe(409);
    expect((late.json as { message: string }).message).toContain('queued again under its id');
    expect(idOf(await poll(taskId))).toBe(queued.id);
    // The rule's count is spent: the second claim runs on past 5 s.
    await clock.advance(60_000);
    expect((await report(queued.id)).status).toBe(200);
    const execution = emulator.execution(queued.id)!;
    expect(execution.reports).toHaveLength(1);
    expect(execution.timeouts).toHaveLength(1);
    expect(emulator.executions()).toHaveLength(1);
  });

  it('a replaced fault table lets a claim it timed run on', async () => {
    const taskId = await start();
    emulator.setFaults([{ kind: 'responseTimeout', ms: 1_000 }]);
    const queued = emulator.enqueueExecution('digest');
    await poll(taskId);
    emulator.clearFaults();
    await clock.advance(2_000);
    expect((await report(queued.id)).status).toBe(200);
  });

  it('refuses a malformed rule, naming the member', async () => {
    await start();
    expect(() => emulator.setFaults([{ kind: 'responseTimeout', ms: 0 }])).toThrow(
      /Fault rule #0 is invalid: ms must be a positive number/,
    );
    expect(() =>
      emulator.setFaults([{ kind: 'responseTimeout', ms: 5, operation: 'executions.report' }]),
    ).toThrow(/operation must be 'tasks.poll'/);
  });
});
