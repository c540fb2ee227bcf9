// The admin routes over variables, file records and the keys' use of the limits, as the web console drives them.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock/manual-clock.ts';
import type { Emulator } from '../../src/emulator/index.ts';
import { call, KEY, startEmulator } from './helpers.ts';

let emulator: Emulator;
const clock = new ManualClock(Date.UTC(2026, 10, 15));

beforeEach(async () => {
  emulator = await startEmulator({ clock, adminToken: 'secret-token', limits: { perMinute: 10 } });
});
afterEach(() => emulator.close());

function admin(method: string, path: string, body?: unknown) {
  return call(emulator, method, path, { key: null, body, headers: { authorization: 'Bearer secret-token' } });
}

describe('admin routes for variables, files and usage', () => {
  it('creates, lists, edits (a new version) and deletes a variable', async () => {
    const created = await admin('POST', '/__admin/variables', { key: 'region', value: 'eu' });
    expect(created.status).toBe(201);
    const { id } = created.json as { id: string };
    expect(created.json).toMatchObject({
      key: 'region',
      name: 'region',
      value: 'eu',
      secret: false,
      etag: '"1"',
    });

    const edited = await admin('PUT', `/__admin/variables/${id}`, { value: 'us' });
    expect(edited.json).toMatchObject({ key: 'region', value: 'us', etag: '"2"' });
    // The service's own route sees the change, version included.
    const read = await call(emulator, 'GET', `/v1/data-factory/variables/${id}`);
    expect(read.json).toMatchObject({ value: 'us' });
    expect(read.headers.get('etag')).toBe('"2"');

    expect((await admin('PUT', `/__admin/variables/${id}`, { secret: 'yes' })).json).toMatchObject({
      message: `Variable '${id}': secret must be a boolean.`,
    });
    expect((await admin('DELETE', `/__admin/variables/${id}`)).status).toBe(204);
    expect((await admin('GET', '/__admin/variables')).json).toEqual({ data: [] });
    expect((await admin('DELETE', `/__admin/variables/${id}`)).status).toBe(404);
  });

  it('adds a file record with the size of its content, renames it and deletes it', async () => {
    const added = await admin('POST', '/__admin/files', {
      name: 'a.csv',
      content: 'x,y\n1,2\n',
      contentType: 'text/csv',
    });
    expect(added.status).toBe(201);
    const { id } = added.json as { id: string };
    expect(added.json).toMatchObject({ name: 'a.csv', size: 8, contentType: 'text/csv' });
    expect((await admin('PUT', `/__admin/files/${id}`, { name: 'b.csv' })).json).toMatchObject({
      name: 'b.csv',
    });
    expect((await call(emulator, 'GET', `/v2/data-factory/files/${id}`)).json).toMatchObject({
      name: 'b.csv',
    });
    expect((await admin('POST', '/__admin/files', { name: '' })).status).toBe(400);
    expect((await admin('DELETE', `/__admin/files/${id}`)).status).toBe(204);
    expect((await admin('GET', '/__admin/files')).json).toEqual({ data: [] });
  });

  it("counts each key's requests in the second, minute and month windows", async () => {
    await call(emulator, 'GET', '/v1/data-factory/tasks');
    await call(emulator, 'GET', '/v1/data-factory/tasks');
    const usage = (await admin('GET', '/__admin/usage')).json as { data: Record<string, unknown>[] };
    expect(usage.data).toEqual([
      {
        apiKey: KEY,
        second: { used: 2, limit: 5 },
        minute: { used: 2, limit: 10 },
        month: { used: 2, limit: 40_000, startsAt: Date.UTC(2026, 10, 1), endsAt: Date.UTC(2026, 11, 1) },
      },
    ]);
  });

  it('needs the admin token, as every admin route', async () => {
    const refused = await call(emulator, 'GET', '/__admin/variables', { key: null });
    expect(refused.status).toBe(401);
  });
});
