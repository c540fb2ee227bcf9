// What the emulator takes from the service's own material: one path spelling only when told, the task fields
// beyond the description kept (and reset by a PUT that lacks them), and the 100 MB upload limit.
import { afterEach, describe, expect, it } from 'vitest';
import { MAX_UPLOAD_BYTES } from '../../src/api/service-limits.ts';
import type { Emulator } from '../../src/emulator/index.ts';
import { call, KEY, startEmulator } from './helpers.ts';

let emulator: Emulator | undefined;
afterEach(async () => {
  await emulator?.close();
  emulator = undefined;
});

describe('an emulator serving one spelling', () => {
  it.each([
    { pathStyle: 'underscore' as const, served: '/v1/data_factory', other: '/v1/data-factory' },
    { pathStyle: 'hyphen' as const, served: '/v1/data-factory', other: '/v1/data_factory' },
  ])('serves only $pathStyle; the other, and a mixed path, get the 404 of an unknown route', async (c) => {
    emulator = await startEmulator({ pathStyle: c.pathStyle, limits: { perSecond: 0, perMinute: 0 } });
    const task = emulator.createTask({ key: 't' });
    const execution = emulator.enqueueExecution('t', {});
    expect((await call(emulator, 'GET', `${c.served}/tasks`)).status).toBe(200);
    expect((await call(emulator, 'GET', `${c.other}/tasks`)).status).toBe(404);
    expect((await call(emulator, 'GET', `${c.other}/tasks/${task.id}/poll`)).status).toBe(404);
    const executions = c.pathStyle === 'underscore' ? 'task_executions' : 'task-executions';
    const mixed = c.pathStyle === 'underscore' ? 'task-executions' : 'task_executions';
    expect((await call(emulator, 'GET', `${c.served}/tasks/${task.id}/poll`)).status).toBe(200);
    expect((await call(emulator, 'GET', `${c.served}/${mixed}/${execution.id}`)).status).toBe(404);
    expect((await call(emulator, 'GET', `${c.served}/${executions}/${execution.id}`)).status).toBe(200);
    expect(
      emulator
        .requests()
        .filter((r) => r.status === 404)
        .map((r) => r.operation),
    ).toEqual(['unknown', 'unknown', 'unknown']);
  });

  it('serves both spellings by default', async () => {
    emulator = await startEmulator();
    expect((await call(emulator, 'GET', '/v1/data_factory/tasks')).status).toBe(200);
    expect((await call(emulator, 'GET', '/v1/data-factory/tasks')).status).toBe(200);
  });
});

describe('task fields beyond the description', () => {
  it('stores and returns them; a PUT that lacks them resets them, one that carries them keeps them', async () => {
    emulator = await startEmulator();
    const extra = { timeoutSeconds: 3600, concurrentExecLimit: 2, inputTemplate: { a: [1] } };
    const created = await call(emulator, 'POST', '/v1/data_factory/tasks', { body: { key: 't', ...extra } });
    expect(created.status).toBe(201);
    const { id } = created.json as { id: string };
    expect((await call(emulator, 'GET', `/v1/data_factory/tasks/${id}`)).json).toMatchObject(extra);

    const kept = await call(emulator, 'PUT', `/v1/data_factory/tasks/${id}`, {
      body: { key: 't', retryCount: 3, ...extra },
    });
    expect(kept.json).toMatchObject({ ...extra, retryCount: 3 });
    const reset = await call(emulator, 'PUT', `/v1/data_factory/tasks/${id}`, { body: { key: 't' } });
    expect(reset.json).not.toHaveProperty('timeoutSeconds');
    expect(reset.json).not.toHaveProperty('concurrentExecLimit');
  });
});

describe('the upload limit', () => {
  it("answers 413 with only a message past the service's 100 MB by default", async () => {
    emulator = await startEmulator();
    const form = new FormData();
    form.append('file', new Blob([new Uint8Array(MAX_UPLOAD_BYTES + 1)]), 'big.bin');
    const answer = await fetch(`${emulator.url}/v2/data_factory/files`, {
      method: 'POST',
      headers: { 'x-api-key': KEY },
      body: form,
    });
    expect(answer.status).toBe(413);
    const body = (await answer.json()) as Record<string, unknown>;
    expect(Object.keys(body)).toEqual(['message']);
    expect(body.message).toContain(String(MAX_UPLOAD_BYTES));
  });
});
