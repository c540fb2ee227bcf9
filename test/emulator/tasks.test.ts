import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Emulator } from '../../src/emulator/index.ts';
import { ManualClock } from '../../src/clock/manual-clock.ts';
import { anyString, call, envelope, startEmulator } from './helpers.ts';

const definition = {
  key: 'resize',
  description: 'Resizes images',
  retryCount: 2,
  inputKeys: [{ key: 'url', description: 'image' }],
  outputKeys: [{ key: 'thumbnail', description: 'resized image' }],
};

let emulator: Emulator;
let clock: ManualClock;

beforeEach(async () => {
  clock = new ManualClock(Date.UTC(2026, 2, 10, 12, 0, 0));
  emulator = await startEmulator({ clock, limits: { perSecond: 0, perMinute: 0, perMonth: 0 } });
});
afterEach(() => emulator.close());

describe('tasks', () => {
  it('creates, reads, updates and deletes a task with the service statuses', async () => {
    const created = await call(emulator, 'POST', '/v1/data-factory/tasks', { body: definition });
    expect(created.status).toBe(201);
    const task = created.json as { id: string };
    expect(task).toEqual({
      object: 'task',
      id: task.id,
      createdAt: '2026-03-10T12:00:00.000Z',
      ...definition,
    });

    expect((await call(emulator, 'GET', `/v1/data-factory/tasks/${task.id}`)).json).toEqual(task);

    await clock.advance(5000);
    const updated = await call(emulator, 'PUT', `/v1/data-factory/tasks/${task.id}`, {
      body: { ...definition, id: task.id, description: 'Resizes pictures' },
    });
    expect(updated.status).toBe(201);
    expect(updated.json).toMatchObject({
      description: 'Resizes pictures',
      updatedAt: '2026-03-10T12:00:05.000Z',
    });

    const deleted = await call(emulator, 'DELETE', `/v1/data-factory/tasks/${task.id}`);
    expect(deleted.status).toBe(201);
    expect(deleted.text).toBe('');
    const gone = await call(emulator, 'GET', `/v1/data-factory/tasks/${task.id}`);
    expect(gone.status).toBe(404);
    expect(gone.json).toEqual(envelope(404, 'NOT_FOUND'));
    expect((await call(emulator, 'DELETE', `/v1/data-factory/tasks/${task.id}`)).status).toBe(404);
    expect(
      (await call(emulator, 'PUT', `/v1/data-factory/tasks/${task.id}`, { body: definition })).status,
    ).toBe(404);
  });

  it('accepts the underscore path spelling for tasks and task executions', async () => {
    const created = await call(emulator, 'POST', '/v1/data_factory/tasks', { body: { key: 'k' } });
    expect(created.status).toBe(201);
    const { id } = created.json as { id: string };
    expect((await call(emulator, 'GET', `/v1/data_factory/tasks/${id}`)).status).toBe(200);
    const execution = emulator.enqueueExecution(id);
    expect((await call(emulator, 'GET', `/v1/data_factory/tasks/${id}/poll`)).status).toBe(200);
    const reported = await call(emulator, 'PATCH', `/v1/data_factory/task_executions/${execution.id}`, {
      body: { id: execution.id, status: 'COMPLETED', output: {} },
    });
    expect(reported.status).toBe(200);
    expect(
      (await call(emulator, 'GET', `/v1/data-factory/task-executions/${execution.id}`)).json,
    ).toMatchObject({
      status: 'COMPLETED',
    });
    expect(emulator.requests().map((r) => r.operation)).toEqual([
      'tasks.create',
      'tasks.get',
      'tasks.poll',
      'executions.report',
      'executions.get',
    ]);
  });

  it('answers 400 BAD_REQUEST in the envelope when the key is missing', async () => {
    const reply = await call(emulator, 'POST', '/v1/data-factory/tasks', { body: { description: 'no key' } });
    expect(reply.status).toBe(400);
    expect(reply.json).toEqual(envelope(400, 'BAD_REQUEST'));
  });

  it('answers a malformed JSON body with 400 and only a message', async () => {
    const reply = await call(emulator, 'POST', '/v1/data-factory/tasks', { body: '{"key": ' });
    expect(reply.status).toBe(400);
    expect(reply.json).toEqual({ message: anyString });
  });

  it('pages the task list in the list envelope and refuses sizes above 1000', async () => {
    for (let i = 0; i < 12; i++) emulator.createTask({ key: `task-${i}` });
    const first = await call(emulator, 'GET', '/v1/data-factory/tasks');
    expect(first.json).toMatchObject({ object: 'list', totalElements: 12 });
    expect((first.json as { data: unknown[] }).data).toHaveLength(10);
    const second = await call(emulator, 'GET', '/v1/data-factory/tasks?page=1&size=10');
    expect((second.json as { data: { key: string }[] }).data.map((t) => t.key)).toEqual([
      'task-10',
      'task-11',
    ]);
    const beyond = await call(emulator, 'GET', '/v1/data-factory/tasks?page=5&size=5');
    expect(beyond.json).toEqual({ object: 'list', data: [], totalElements: 12 });
    expect((await call(emulator, 'GET', '/v1/data-factory/tasks?size=1000')).status).toBe(200);
    const tooBig = await call(emulator, 'GET', '/v1/data-factory/tasks?size=1001');
    expect(tooBig.status).toBe(400);
    expect(tooBig.json).toEqual(envelope(400, 'BAD_REQUEST'));
  });

  it('answers an unknown route with the 404 NOT_FOUND envelope', async () => {
    const reply = await call(emulator, 'GET', '/v1/data-factory/pipelines');
    expect(reply.status).toBe(404);
    expect(reply.json).toEqual(envelope(404, 'NOT_FOUND'));
    expect(emulator.requests()[0]).toMatchObject({ operation: 'unknown', status: 404 });
  });
});

describe('poll and report', () => {
  it('hands each pending execution out once, oldest first, then answers 404 NOT_FOUND', async () => {
    const task = emulator.createTask({ key: 'resize' });
    const first = emulator.enqueueExecution('resize', { url: 'a' });
    const second = emulator.enqueueExecution(task.id, { url: 'b' });

    const polled = await call(emulator, 'GET', `/v1/data-factory/tasks/${task.id}/poll`);
    expect(polled.status).toBe(200);
    expect(polled.json).toEqual({
      object: 'task_execution',
      id: first.id,
      taskId: task.id,
      createdAt: first.createdAt,
      status: 'IN_PROGRESS',
      input: {
        url: 'a',
        context: {
          jobAccountId: anyString,
          jobId: anyString,
          userAccountId: anyString,
          userId: anyString,
        },
      },
    });
    expect(
      ((await call(emulator, 'GET', `/v1/data-factory/tasks/${task.id}/poll`)).json as { id: string }).id,
    ).toBe(second.id);
    const none = await call(emulator, 'GET', `/v1/data-factory/tasks/${task.id}/poll`);
    expect(none.status).toBe(404);
    expect(none.json).toEqual(envelope(404, 'NOT_FOUND'));
    expect(emulator.executions().every((e) => e.claimedAt !== undefined)).toBe(true);
  });

  it('answers 404 to a poll of a task that does not exist', async () => {
    const reply = await call(emulator, 'GET', '/v1/data-factory/tasks/nope/poll');
    expect(reply.status).toBe(404);
    expect(reply.json).toEqual(envelope(404, 'NOT_FOUND'));
  });

  it('keeps the context given to enqueueExecution in the input', () => {
    emulator.createTask({ key: 'k' });
    const context = { jobAccountId: '7', jobId: '8', userAccountId: '9', userId: '10' };
    const execution = emulator.enqueueExecution('k', { n: 1 }, context);
    expect(execution.input).toEqual({ n: 1, context });
  });

  it('stores a COMPLETED report with its output and records every report, duplicates included', async () => {
    const task = emulator.createTask({ key: 'resize' });
    const execution = emulator.enqueueExecution(task.id, { url: 'a' });
    await call(emulator, 'GET', `/v1/data-factory/tasks/${task.id}/poll`);
    await clock.advance(1000);
    const path = `/v1/data-factory/task-executions/${execution.id}`;
    const body = { id: execution.id, status: 'COMPLETED', output: { thumbnail: 't.png' } };
    const reported = await call(emulator, 'PATCH', path, { body });
    expect(reported.status).toBe(200);
    expect(reported.json).toMatchObject({
      id: execution.id,
      status: 'COMPLETED',
      output: { thumbnail: 't.png' },
      updatedAt: '2026-03-10T12:00:01.000Z',
    });
    expect(
      (await call(emulator, 'PATCH', path, { body: { ...body, status: 'FAILED', output: {} } })).status,
    ).toBe(200);
    const [stored] = emulator.executions();
    expect(stored!.status).toBe('FAILED');
    expect(stored!.reports).toEqual([
      { at: '2026-03-10T12:00:01.000Z', status: 'COMPLETED', output: { thumbnail: 't.png' } },
      { at: '2026-03-10T12:00:01.000Z', status: 'FAILED', output: {} },
    ]);
  });

  it('refuses a report whose status is not COMPLETED or FAILED, or whose output is not an object', async () => {
    emulator.createTask({ key: 'k' });
    const execution = emulator.enqueueExecution('k');
    const path = `/v1/data-factory/task-executions/${execution.id}`;
    const badStatus = await call(emulator, 'PATCH', path, {
      body: { id: execution.id, status: 'IN_PROGRESS' },
    });
    expect(badStatus.status).toBe(400);
    expect(badStatus.json).toEqual(envelope(400, 'BAD_REQUEST'));
    const badOutput = await call(emulator, 'PATCH', path, { body: { status: 'FAILED', output: [1] } });
    expect(badOutput.status).toBe(400);
    expect(emulator.executions()[0]!.reports).toEqual([]);
  });

  it('answers 404 to a report on an unknown execution', async () => {
    const reply = await call(emulator, 'PATCH', '/v1/data-factory/task-executions/nope', {
      body: { id: 'nope', status: 'COMPLETED', output: {} },
    });
    expect(reply.status).toBe(404);
    expect(reply.json).toEqual(envelope(404, 'NOT_FOUND'));
  });
});
