import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { EmulatedExecution, RequestRecord } from '../../src/emulator/index.ts';
import { Emulator, EmulatorStateError, UnknownTaskError } from '../../src/emulator/index.ts';
import { ManualClock } from '../../src/clock/manual-clock.ts';
import { anyNumber, call, envelope, startEmulator } from './helpers.ts';

let emulator: Emulator;

beforeEach(async () => {
  emulator = await startEmulator({ clock: new ManualClock(), limits: { perSecond: 1 } });
});
afterEach(() => emulator.close());

/** Admin calls carry no API key. */
function admin(method: string, path: string, body?: unknown) {
  return call(emulator, method, path, { key: null, body });
}

describe('admin HTTP surface', () => {
  it('creates tasks and enqueues executions by task id or key, one or many', async () => {
    const created = await admin('POST', '/__admin/tasks', { key: 'resize', description: 'd' });
    expect(created.status).toBe(201);
    const task = created.json as { id: string };
    expect(task).toMatchObject({ object: 'task', key: 'resize', description: 'd', retryCount: 0 });

    const one = await admin('POST', '/__admin/executions', {
      taskId: task.id,
      input: { url: 'a' },
      context: { jobId: 'j1' },
    });
    expect(one.status).toBe(201);
    expect(one.json).toMatchObject({
      taskKey: 'resize',
      status: 'IN_PROGRESS',
      input: { url: 'a', context: { jobId: 'j1' } },
    });
    const many = await admin('POST', '/__admin/executions', {
      taskKey: 'resize',
      inputs: [{ n: 1 }, { n: 2 }],
    });
    expect(many.status).toBe(201);
    expect((many.json as { data: unknown[] }).data).toHaveLength(2);

    const listed = await admin('GET', '/__admin/executions');
    const executions = (listed.json as { data: EmulatedExecution[] }).data;
    expect(executions.map((e) => e.input.n ?? e.input.url)).toEqual(['a', 1, 2]);
    expect(executions.every((e) => e.reports.length === 0)).toBe(true);
  });

  it('answers 404 for an unknown task and 400 for a task without key', async () => {
    const unknown = await admin('POST', '/__admin/executions', { taskKey: 'missing' });
    expect(unknown.status).toBe(404);
    expect(unknown.json).toEqual(envelope(404, 'NOT_FOUND'));
    expect((await admin('POST', '/__admin/tasks', { description: 'no key' })).status).toBe(400);
    expect(() => emulator.enqueueExecution('missing')).toThrow(UnknownTaskError);
  });

  it('lists service requests but not admin requests, and is never rate-limited', async () => {
    await call(emulator, 'GET', '/v1/data-factory/tasks?page=0');
    for (let i = 0; i < 3; i++) expect((await admin('GET', '/__admin/requests')).status).toBe(200);
    const { data } = (await admin('GET', '/__admin/requests')).json as { data: RequestRecord[] };
    expect(data).toEqual([
      {
        at: anyNumber,
        earliestAt: anyNumber,
        method: 'GET',
        path: '/v1/data-factory/tasks',
        operation: 'tasks.list',
        status: 200,
        apiKeyValid: true,
        rateLimited: false,
        latencyMs: anyNumber,
      },
    ]);
  });

  it('sets and clears faults, refusing malformed rules with 400', async () => {
    expect((await admin('PUT', '/__admin/faults', { rules: [{ kind: 'status', status: 503 }] })).status).toBe(
      204,
    );
    expect((await call(emulator, 'GET', '/v1/data-factory/tasks')).status).toBe(503);
    expect((await admin('PUT', '/__admin/faults', { rules: [{ kind: 'status' }] })).status).toBe(400);
    expect((await admin('DELETE', '/__admin/faults')).status).toBe(204);
    expect((await call(emulator, 'GET', '/v1/data-factory/tasks')).status).toBe(200);
  });

  it('resets tasks, executions, the request log, faults and consumed budget', async () => {
    emulator.createTask({ key: 'k' });
    emulator.enqueueExecution('k');
    emulator.setFaults([{ kind: 'status', status: 500, operation: 'tasks.get' }]);
    expect((await call(emulator, 'GET', '/v1/data-factory/tasks')).status).toBe(200);
    expect((await admin('POST', '/__admin/reset')).status).toBe(204);
    expect(emulator.executions()).toEqual([]);
    expect(emulator.requests()).toEqual([]);
    // The per-second budget of 1 was spent before the reset.
    const list = await call(emulator, 'GET', '/v1/data-factory/tasks');
    expect(list.status).toBe(200);
    expect(list.json).toMatchObject({ totalElements: 0 });
    expect((await call(emulator, 'GET', '/v1/data-factory/tasks/task-1')).status).toBe(429);
  });

  it('answers an unknown admin route with 404 pointing at the route list', async () => {
    const unknown = await admin('GET', '/__admin/nothing');
    expect(unknown.status).toBe(404);
    expect((unknown.json as { message: string }).message).toMatch(/GET \/__admin lists the routes/);
  });

  it('lists its routes at the admin root, with or without a trailing slash', async () => {
    for (const root of ['/__admin', '/__admin/']) {
      const index = await admin('GET', root);
      expect(index.status).toBe(200);
      const { routes, authorization } = index.json as { routes: string[]; authorization: string };
      expect(routes.map((r) => r.split(':')[0])).toEqual([
        'GET /__admin',
        'GET /__admin/tasks',
        'POST /__admin/tasks',
        'POST /__admin/executions',
        'GET /__admin/executions',
        'GET /__admin/executions/{id}',
        'GET /__admin/requests',
        'PUT /__admin/faults',
        'DELETE /__admin/faults',
        'POST /__admin/reset',
        'GET /__admin/variables',
        'POST /__admin/variables',
        'PUT /__admin/variables/{id}',
        'DELETE /__admin/variables/{id}',
        'GET /__admin/files',
        'POST /__admin/files',
        'PUT /__admin/files/{id}',
        'DELETE /__admin/files/{id}',
        'GET /__admin/usage',
      ]);
      expect(authorization).toMatch(/no admin token/);
    }
  });

  it('lists tasks and reads one execution with its claim and reports', async () => {
    emulator.createTask({ key: 'k' });
    const queued = emulator.enqueueExecution('k', { n: 1 });
    expect(((await admin('GET', '/__admin/tasks')).json as { data: unknown[] }).data).toEqual([
      expect.objectContaining({ key: 'k' }),
    ]);
    const one = await admin('GET', `/__admin/executions/${queued.id}`);
    expect(one.status).toBe(200);
    expect(one.json).toMatchObject({ id: queued.id, taskKey: 'k', reports: [] });
    expect((await admin('GET', '/__admin/executions/execution-99')).status).toBe(404);
  });
});

describe('admin token and enqueue hook', () => {
  it('refuses admin calls without the token (401) but lists the routes to anyone', async () => {
    const enqueued: string[] = [];
    const guarded = await startEmulator({
      adminToken: 'tok-123',
      onEnqueue: (execution) => enqueued.push(execution.id),
    });
    try {
      guarded.createTask({ key: 'k' });
      const refused = await call(guarded, 'POST', '/__admin/executions', {
        key: null,
        body: { taskKey: 'k' },
      });
      expect(refused.status).toBe(401);
      expect((refused.json as { message: string }).message).toMatch(/Authorization: Bearer/);
      const wrong = await call(guarded, 'GET', '/__admin/executions', {
        key: null,
        headers: { authorization: 'Bearer tok-12' },
      });
      expect(wrong.status).toBe(401);
      const index = await call(guarded, 'GET', '/__admin/', { key: null });
      expect(index.status).toBe(200);
      expect((index.json as { authorization: string }).authorization).toMatch(/needs Authorization: Bearer/);
      const accepted = await call(guarded, 'POST', '/__admin/executions', {
        key: null,
        body: { taskKey: 'k', inputs: [{ n: 1 }, { n: 2 }] },
        headers: { authorization: 'Bearer tok-123' },
      });
      expect(accepted.status).toBe(201);
      guarded.enqueueExecution('k');
      expect(enqueued).toEqual(['execution-1', 'execution-2', 'execution-3']);
    } finally {
      await guarded.close();
    }
  });
});

describe('lifecycle', () => {
  it('throws EmulatorStateError for url before listen and for a second listen', async () => {
    const idle = new Emulator();
    expect(() => idle.url).toThrow(EmulatorStateError);
    await expect(emulator.listen()).rejects.toThrow(EmulatorStateError);
    expect(emulator.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    await idle.close();
  });
});
