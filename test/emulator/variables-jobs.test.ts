import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Emulator } from '../../src/emulator/index.ts';
import { ManualClock } from '../../src/clock/manual-clock.ts';
import { anyString, call, envelope, KEY, startEmulator } from './helpers.ts';

const VARIABLES = '/v1/data-factory/variables';
let emulator: Emulator;

beforeEach(async () => {
  emulator = await startEmulator({ clock: new ManualClock(Date.UTC(2026, 4, 1)), maxUploadBytes: 1024 });
});
afterEach(() => emulator.close());

const update = { key: 'token', name: 'Token', value: 'v2', secret: false, status: 'ACTIVE' };

describe('variables', () => {
  it('answers a variable with its version as a quoted ETag', async () => {
    const { id } = emulator.createVariable({ key: 'token', value: 'v1' });
    const reply = await call(emulator, 'GET', `${VARIABLES}/${id}`);
    expect(reply.status).toBe(200);
    expect(reply.headers.get('etag')).toBe('"1"');
    expect(reply.json).toMatchObject({ object: 'variable', id, key: 'token', value: 'v1', status: 'ACTIVE' });
  });

  it('applies an update whose If-Match is current and raises the version', async () => {
    const { id } = emulator.createVariable({ key: 'token', value: 'v1' });
    const reply = await call(emulator, 'PUT', `${VARIABLES}/${id}`, {
      body: update,
      headers: { 'if-match': '"1"' },
    });
    expect(reply.status).toBe(201);
    expect(reply.headers.get('etag')).toBe('"2"');
    expect(emulator.variable(id)).toMatchObject({ value: 'v2', etag: '"2"' });
  });

  it('answers 412 PRECONDITION_FAILED on a stale If-Match and changes nothing', async () => {
    const { id } = emulator.createVariable({ key: 'token', value: 'v1' });
    await call(emulator, 'PUT', `${VARIABLES}/${id}`, { body: update });
    const stale = await call(emulator, 'PUT', `${VARIABLES}/${id}`, {
      body: { ...update, value: 'v3' },
      headers: { 'if-match': '"1"' },
    });
    expect(stale.status).toBe(412);
    expect(stale.json).toEqual(envelope(412, 'PRECONDITION_FAILED'));
    expect(emulator.variable(id)).toMatchObject({ value: 'v2', etag: '"2"' });
  });

  it('answers 404 for an unknown variable and 400 for an update lacking a member', async () => {
    expect((await call(emulator, 'GET', `${VARIABLES}/nope`)).json).toEqual(envelope(404, 'NOT_FOUND'));
    const { id } = emulator.createVariable({ key: 'token', value: 'v1' });
    const bad = await call(emulator, 'PUT', `${VARIABLES}/${id}`, { body: { key: 'token' } });
    expect(bad.status).toBe(400);
    expect(emulator.variable(id)?.etag).toBe('"1"');
  });
});

describe('job executions and file records', () => {
  it('creates a job execution and answers it by id on both path spellings', async () => {
    const created = await call(emulator, 'POST', '/v1/data-factory/job-executions', {
      body: { jobId: 'j1' },
    });
    expect(created.status).toBe(201);
    const id = (created.json as { id: string }).id;
    const read = await call(emulator, 'GET', `/v1/data_factory/job_executions/${id}`);
    expect(read.status).toBe(200);
    expect(read.json).toMatchObject({ id, jobId: 'j1', createdAt: anyString });
    expect((await call(emulator, 'GET', '/v1/data-factory/job-executions/x')).status).toBe(404);
  });

  it('answers an uploaded file record by id, 404 for an unknown one', async () => {
    const form = new FormData();
    form.set('file', new Blob(['a']), 'a.txt');
    const response = await fetch(`${emulator.url}/v2/data-factory/files`, {
      method: 'POST',
      headers: { 'x-api-key': KEY },
      body: form,
    });
    const { id } = (await response.json()) as { id: string };
    expect((await call(emulator, 'GET', `/v2/data-factory/files/${id}`)).json).toMatchObject({
      id,
      name: 'a.txt',
    });
    expect((await call(emulator, 'GET', '/v2/data-factory/files/none')).status).toBe(404);
  });
});
