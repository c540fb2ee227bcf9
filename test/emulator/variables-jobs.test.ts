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

describe('the variable routes of part 4.7', () => {
  const created = (body: unknown) => call(emulator, 'POST', VARIABLES, { body });
  const ids = (reply: { json: unknown }) => (reply.json as { data: { id: string }[] }).data.map((v) => v.id);

  it('creates a variable (201) that GET then answers with its ETag, and hides a secret value in the answer', async () => {
    const plain = await created({
      key: 'region',
      name: 'Region',
      status: 'ACTIVE',
      value: 'eu',
      secret: false,
    });
    expect(plain.status).toBe(201);
    expect(plain.json).toMatchObject({ object: 'variable', id: 'variable-1', key: 'region', value: 'eu' });
    const secret = await created({ key: 'token', name: 'Token', value: 's3cret', secret: true });
    expect(secret.json).toMatchObject({ id: 'variable-2', value: '', secret: true, status: 'ACTIVE' });
    const read = await call(emulator, 'GET', `${VARIABLES}/variable-2`);
    expect(read.headers.get('etag')).toBe('"1"');
    expect(read.json).toMatchObject({ key: 'token', value: 's3cret' });
  });

  it('refuses a create lacking a member with 400 BAD_REQUEST naming it, creating nothing', async () => {
    const bad = await created({ key: 'token', name: 'Token', value: 1, secret: false });
    expect(bad.status).toBe(400);
    expect(bad.json).toEqual(envelope(400, 'BAD_REQUEST'));
    expect((bad.json as { message: string }).message).toBe('New variable: value must be a string.');
    expect((await call(emulator, 'GET', VARIABLES)).json).toMatchObject({ data: [], totalElements: 0 });
  });

  it('lists variables in pages, sorted on request, and refuses a page size over 1000', async () => {
    for (const key of ['c', 'a', 'b']) emulator.createVariable({ key, value: key });
    const first = await call(emulator, 'GET', `${VARIABLES}?page=0&size=2`);
    expect(first.json).toMatchObject({ object: 'list', totalElements: 3 });
    expect(ids(first)).toEqual(['variable-1', 'variable-2']);
    expect(ids(await call(emulator, 'GET', `${VARIABLES}?page=1&size=2`))).toEqual(['variable-3']);
    const sorted = await call(emulator, 'GET', `${VARIABLES}?sort=key&sortOrder=DESC`);
    expect((sorted.json as { data: { key: string }[] }).data.map((v) => v.key)).toEqual(['c', 'b', 'a']);
    expect((await call(emulator, 'GET', `${VARIABLES}?size=1001`)).json).toEqual(
      envelope(400, 'BAD_REQUEST'),
    );
    expect((await call(emulator, 'GET', `${VARIABLES}?sortOrder=UP`)).status).toBe(400);
  });

  // The emulator's clock stands still: at most 5 requests a test (the per-second limit).
  const find = (query: unknown, search = '') =>
    call(emulator, 'POST', `${VARIABLES}/find${search}`, { body: query });
  const threeVariables = () => {
    emulator.createVariable({ key: 'api-token', value: 't' });
    emulator.createVariable({ key: 'api-url', value: 'u' });
    emulator.createVariable({ key: 'Region', value: 'eu' });
  };

  it('finds variables by eq, search with %, and in, case-sensitive unless told otherwise', async () => {
    threeVariables();
    expect(ids(await find({ type: 'eq', field: 'key', value: 'api-url' }))).toEqual(['variable-2']);
    expect(ids(await find({ type: 'search', field: 'key', value: 'api%' }))).toEqual([
      'variable-1',
      'variable-2',
    ]);
    expect(ids(await find({ type: 'eq', field: 'key', value: 'region' }))).toEqual([]);
    expect(ids(await find({ type: 'eq', field: 'key', value: 'region', caseSensitive: false }))).toEqual([
      'variable-3',
    ]);
    expect(ids(await find({ type: 'in', field: 'value', value: ['t', 'eu'] }))).toEqual([
      'variable-1',
      'variable-3',
    ]);
  });

  it('finds variables by greaterOrEqual, and nested and/or, a page at a time', async () => {
    threeVariables();
    expect(ids(await find({ type: 'greaterOrEqual', field: 'id', value: 'variable-2' }))).toEqual([
      'variable-2',
      'variable-3',
    ]);
    const tree = {
      type: 'or',
      queries: [
        {
          type: 'and',
          queries: [
            { type: 'search', field: 'key', value: 'api%' },
            { type: 'eq', field: 'value', value: 'u' },
          ],
        },
        { type: 'eq', field: 'key', value: 'Region' },
      ],
    };
    const found = await find(tree, '?size=1');
    expect(found.json).toMatchObject({ object: 'list', totalElements: 2 });
    expect(ids(found)).toEqual(['variable-2']);
    expect(ids(await find({}))).toHaveLength(3);
  });

  it('refuses a find whose query tree it cannot read, naming the node', async () => {
    const bad = await call(emulator, 'POST', `${VARIABLES}/find`, {
      body: {
        type: 'and',
        queries: [
          { type: 'eq', field: 'key', value: 'a' },
          { type: 'like', field: 'key' },
        ],
      },
    });
    expect(bad.status).toBe(400);
    expect((bad.json as { message: string }).message).toBe(
      'Find: queries[1]: type must be one of eq, search, in, greaterOrEqual, and, or, got "like".',
    );
  });

  it('creates a variable under an id of the caller (admin route), refusing one in use; the service skips it', async () => {
    const admin = (body: unknown) => call(emulator, 'POST', '/__admin/variables', { key: null, body });
    const made = await admin({ id: 'variable-1', key: 'api-token', value: 's3cret' });
    expect(made.status).toBe(201);
    expect(made.json).toMatchObject({ id: 'variable-1', key: 'api-token', name: 'api-token', etag: '"1"' });
    const again = await admin({ id: 'variable-1', key: 'other', value: 'x' });
    expect(again.status).toBe(409);
    expect(again.json).toEqual(envelope(409, 'ALREADY_EXISTS'));
    expect((await admin({ key: 'k' })).json).toEqual(envelope(400, 'BAD_REQUEST'));
    const next = await created({ key: 'region', name: 'Region', value: 'eu', secret: false });
    expect(next.json).toMatchObject({ id: 'variable-2' });
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
