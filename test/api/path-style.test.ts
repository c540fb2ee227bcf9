// The client's `auto` spelling: found once by a task list (underscore first), shared with its siblings, kept;
// a failure that is not a missing route leaves it unknown, and a fixed spelling sends no probe.
import { describe, expect, it } from 'vitest';
import { ServiceError } from '../../src/api/errors.ts';
import { failure, useEmulatorAndClients } from './emulator-fixture.ts';

const fx = useEmulatorAndClients({ pathStyle: 'hyphen' });
const auto = { pathStyle: 'auto' } as const;
const sent = () => fx.emu.requests().map((request) => `${request.status} ${request.path}`);

describe('DF_API_PATH_STYLE=auto in the client', () => {
  it('probes with a task list of size 1 before a first request of another kind, once for every sibling', async () => {
    fx.emu.createVariable({ id: 'v1', key: 'token', value: 'abc' });
    const client = fx.client(auto);
    expect(client.toJSON().pathStyle).toBe('auto');
    await client.getVariable('v1');
    await client.withGate({ acquire: () => Promise.resolve() }).getVariable('v1');
    expect(sent()).toEqual([
      '404 /v1/data_factory/tasks',
      '200 /v1/data-factory/tasks',
      '200 /v1/data-factory/variables/v1',
      '200 /v1/data-factory/variables/v1',
    ]);
    expect(client.pathStyleFound).toEqual({ style: 'hyphen', tried: ['underscore', 'hyphen'] });
    expect(client.toJSON().pathStyle).toBe('hyphen');
  });

  it('answers the first task list from the probe itself, with the page asked for', async () => {
    fx.emu.createTask({ key: 'a' });
    fx.emu.createTask({ key: 'b' });
    const tasks = await fx.client(auto).listTasks();
    expect(tasks.map((task) => task.key)).toEqual(['a', 'b']);
    expect(fx.emu.requests()).toHaveLength(2);
  });

  it('leaves the spelling unknown after a failure that is not a missing route, and probes again', async () => {
    fx.emu.setFaults([{ kind: 'status', status: 503, count: 1 }]);
    const client = fx.client(auto);
    const error = await failure(client.listTasks(), ServiceError);
    expect(error.status).toBe(503);
    expect(client.pathStyleFound).toBeUndefined();
    await client.listTasks();
    expect(sent()).toEqual([
      '503 /v1/data_factory/tasks',
      '404 /v1/data_factory/tasks',
      '200 /v1/data-factory/tasks',
    ]);
  });

  it('sends no probe under a fixed spelling', async () => {
    await fx.client({ pathStyle: 'hyphen' }).listTasks();
    expect(sent()).toEqual(['200 /v1/data-factory/tasks']);
  });
});

describe('a poll answered 404', () => {
  it.each([
    { what: 'an empty body', body: '' },
    { what: 'a {message} of a missing route', body: '{"message":"No handler for GET"}' },
  ])('is no "nothing pending" with $what: only the NOT_FOUND envelope is', async ({ body }) => {
    const task = fx.emu.createTask({ key: 'k' });
    const client = fx.client({ pathStyle: 'hyphen' });
    fx.emu.setFaults([
      {
        operation: 'tasks.poll',
        kind: 'status',
        status: 404,
        body,
        contentType: 'application/json',
        count: 1,
      },
    ]);
    const error = await failure(client.pollTask(task.id), ServiceError);
    expect(error.status).toBe(404);
    expect(await client.pollTask(task.id)).toBeNull();
  });
});
