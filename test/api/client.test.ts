import { readFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { inspect } from 'node:util';
import { describe, expect, it } from 'vitest';
import type { RequestGate, ServiceClientOptions } from '../../src/api/client.ts';
import { ReportValidationError, ServiceClientError } from '../../src/api/errors.ts';
import type { JsonObject, Operation, ReportStatus, TaskDefinition } from '../../src/api/types.ts';
import { KEY, told, useEmulatorAndClients } from './emulator-fixture.ts';

const fx = useEmulatorAndClients();
const emu = () => fx.emu;

const client = (options: Partial<ServiceClientOptions> = {}) => fx.client(options);

const definition: TaskDefinition = {
  key: 'enrich',
  description: 'adds a title',
  retryCount: 1,
  inputKeys: [{ key: 'sku', description: 'the sku' }],
  outputKeys: [{ key: 'title', description: 'the title' }],
};

describe('ServiceClient tasks', () => {
  it('follows pages until totalElements: 25 tasks at pageSize 10 take 3 requests', async () => {
    for (let i = 0; i < 25; i++) emu().createTask({ key: `task-${i}` });
    const tasks = await client().listTasks({ pageSize: 10 });
    expect(tasks.map((t) => t.key).sort()).toEqual(Array.from({ length: 25 }, (_, i) => `task-${i}`).sort());
    const lists = emu()
      .requests()
      .filter((r) => r.operation === 'tasks.list');
    expect(lists).toHaveLength(3);
  });

  it('returns one page with its envelope', async () => {
    for (let i = 0; i < 3; i++) emu().createTask({ key: `task-${i}` });
    const page = await client().listTasksPage(1, 2);
    expect(page.totalElements).toBe(3);
    expect(page.data).toHaveLength(1);
  });

  it('stops listing at an empty page and refuses a page size above 1000 without a request', async () => {
    expect(await client().listTasks()).toEqual([]);
    await expect(client().listTasks({ pageSize: 1001 })).rejects.toBeInstanceOf(RangeError);
    expect(emu().requests()).toHaveLength(1);
  });

  it('creates, reads, updates and deletes a task', async () => {
    const api = client();
    const created = await api.createTask(definition);
    expect(created).toMatchObject({
      object: 'task',
      key: 'enrich',
      retryCount: 1,
      inputKeys: definition.inputKeys,
    });
    expect(await api.getTask(created.id)).toEqual(created);
    const updated = await api.updateTask(created.id, { ...definition, description: 'new' });
    expect(updated.description).toBe('new');
    expect(typeof updated.updatedAt).toBe('string');
    await api.deleteTask(created.id);
    await expect(api.getTask(created.id)).rejects.toMatchObject({ status: 404, code: 'NOT_FOUND' });
  });

  it('speaks the underscore path style when asked', async () => {
    const task = emu().createTask({ key: 'enrich' });
    const execution = emu().enqueueExecution(task.id, { sku: 'A' });
    const api = client({ pathStyle: 'underscore' });
    expect((await api.pollTask(task.id))?.id).toBe(execution.id);
    await api.getExecution(execution.id);
    expect(
      emu()
        .requests()
        .map((r) => r.path),
    ).toEqual([`/v1/data_factory/tasks/${task.id}/poll`, `/v1/data_factory/task_executions/${execution.id}`]);
  });
});

describe('ServiceClient executions', () => {
  it('polls an execution, then null once nothing is pending', async () => {
    const task = emu().createTask({ key: 'enrich', inputKeys: [{ key: 'sku', description: '' }] });
    const queued = emu().enqueueExecution(task.id, { sku: 'A' });
    const api = client();
    const polled = await api.pollTask(task.id);
    expect(polled).toMatchObject({ id: queued.id, taskId: task.id, status: 'IN_PROGRESS' });
    expect(polled?.input.sku).toBe('A');
    expect(await api.pollTask(task.id)).toBeNull();
  });

  it('reports an outcome that the service stores', async () => {
    const task = emu().createTask({ key: 'enrich' });
    const execution = emu().enqueueExecution(task.id, { sku: 'A' });
    const api = client();
    const reported = await api.reportExecution(execution.id, { status: 'COMPLETED', output: { title: 'T' } });
    expect(reported).toMatchObject({ id: execution.id, status: 'COMPLETED', output: { title: 'T' } });
    expect(emu().executions()[0]!.reports).toMatchObject([{ status: 'COMPLETED', output: { title: 'T' } }]);
    expect((await api.getExecution(execution.id)).status).toBe('COMPLETED');
  });

  it('refuses a report with a bad status or a non-object output without sending it', async () => {
    const api = client();
    const bad: { status: ReportStatus; output: JsonObject }[] = [
      { status: 'IN_PROGRESS' as ReportStatus, output: {} },
      { status: 'FAILED', output: [] as unknown as JsonObject },
      { status: 'FAILED', output: null as unknown as JsonObject },
      { status: 'COMPLETED', output: new Map() as unknown as JsonObject },
      { status: 'COMPLETED', output: { n: 1n } },
    ];
    for (const report of bad) {
      await expect(api.reportExecution('e1', report)).rejects.toBeInstanceOf(ReportValidationError);
    }
    expect(emu().requests()).toEqual([]);
  });
});

describe('ServiceClient requests', () => {
  it('uploads a file as multipart part "file" and returns the 201 record', async () => {
    const file = await client().uploadFile({
      name: 'a.csv',
      data: new TextEncoder().encode('a,b\n'),
      contentType: 'text/csv',
    });
    expect(file).toMatchObject({ id: expect.any(String) as string, name: 'a.csv', size: 4 });
    expect(emu().requests()).toMatchObject([{ operation: 'files.upload', status: 201 }]);
  });

  it('awaits the gate before every request, each page included', async () => {
    for (let i = 0; i < 5; i++) emu().createTask({ key: `task-${i}` });
    const log: string[] = [];
    const gate: RequestGate = {
      acquire: (operation: Operation) => {
        log.push(`gate ${operation} after ${emu().requests().length} requests`);
        return Promise.resolve();
      },
    };
    const api = client({ gate });
    await api.listTasks({ pageSize: 2 });
    await api.pollTask('missing');
    expect(log).toEqual([
      'gate tasks.list after 0 requests',
      'gate tasks.list after 1 requests',
      'gate tasks.list after 2 requests',
      'gate tasks.poll after 3 requests',
    ]);
  });

  it('tells the gate of every answer, Retry-After included, before the caller sees it', async () => {
    emu().createTask({ key: 'enrich' });
    const log: string[] = [];
    const gate: RequestGate = {
      acquire: () => Promise.resolve(),
      observe: ({ operation, status, retryAfterMs }) => {
        log.push(`${operation} ${status} retry-after ${retryAfterMs}`);
      },
    };
    const api = client({ gate });
    await api.listTasks();
    expect(await api.pollTask('missing')).toBeNull();
    emu().setFaults([{ operation: 'tasks.poll', kind: 'rateLimit', retryAfterSeconds: 7, count: 1 }]);
    await api.pollTask('missing').catch((error: unknown) => log.push(`caller: ${(error as Error).name}`));
    expect(log).toEqual([
      'tasks.list 200 retry-after undefined',
      'tasks.poll 404 retry-after undefined',
      'tasks.poll 429 retry-after 7000',
      'caller: ServiceError',
    ]);
  });

  it("hands the answer to the caller even when the gate's observe throws", async () => {
    const task = emu().createTask({ key: 'enrich' });
    const queued = emu().enqueueExecution(task.id, {});
    const gate: RequestGate = {
      acquire: () => Promise.resolve(),
      observe: () => {
        throw new Error('broken gate');
      },
    };
    expect((await client({ gate }).pollTask(task.id))?.id).toBe(queued.id);
  });

  it('sends nothing when the gate refuses', async () => {
    const refusal = new Error('budget exhausted');
    const api = client({ gate: { acquire: () => Promise.reject(refusal) } });
    await expect(api.getTask('t1')).rejects.toBe(refusal);
    expect(emu().requests()).toEqual([]);
  });

  it('tells each request once as a response event, surviving a throwing listener', async () => {
    const { events: emitter, seen: events } = told('response');
    emitter.on('response', () => {
      throw new Error('broken listener');
    });
    const api = client({ events: emitter });
    const task = await api.createTask(definition);
    await expect(api.getTask('missing')).rejects.toBeInstanceOf(ServiceClientError);
    expect(await api.pollTask(task.id)).toBeNull();
    expect(events.map((e) => [e.operation, e.status, e.error?.name])).toEqual([
      ['tasks.create', 201, undefined],
      ['tasks.get', 404, 'ServiceError'],
      ['tasks.poll', 404, undefined],
    ]);
    expect(events.every((e) => e.durationMs >= 0)).toBe(true);
  });

  it("tells a handler attempt's requests as its serviceCall too, and costs nothing while nobody listens", async () => {
    const { events: emitter, seen: responses } = told('response');
    const api = client({ events: emitter });
    const attempt = { task: 'enrich', executionId: 'e1', attempt: 2 };
    // No listener of serviceCall (tracing off): the attempt's client is the client itself.
    expect(api.forAttempt(attempt)).toBe(api);
    const withoutEvents = client();
    expect(withoutEvents.forAttempt(attempt)).toBe(withoutEvents);

    const calls: unknown[] = [];
    emitter.on('serviceCall', (call) => calls.push(call));
    const ofAttempt = api.forAttempt(attempt);
    expect(ofAttempt).not.toBe(api);
    const task = await ofAttempt.createTask(definition);
    await expect(ofAttempt.getTask('missing')).rejects.toBeInstanceOf(ServiceClientError);
    // The parent's own requests are not the attempt's.
    expect(await api.pollTask(task.id)).toBeNull();
    expect(responses.map((e) => [e.operation, e.status])).toEqual([
      ['tasks.create', 201],
      ['tasks.get', 404],
      ['tasks.poll', 404],
    ]);
    expect(calls).toEqual([
      { ...attempt, ...responses[0] },
      { ...attempt, ...responses[1] },
    ]);
    expect(calls[1]).toMatchObject({ error: { name: 'ServiceError' } });
    // Same connections: closing the attempt's client leaves the parent's.
    await ofAttempt.close();
    expect(await api.pollTask(task.id)).toBeNull();
  });

  it('sends the key as X-Api-Key with a df-worker user agent under the base URL prefix', async () => {
    // The emulator does not log headers; a bare loopback server shows exactly what goes on the wire.
    const seen: IncomingHttpHeaders[] = [];
    const paths: (string | undefined)[] = [];
    const server = createServer((request, response) => {
      seen.push(request.headers);
      paths.push(request.url);
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ object: 'list', data: [], totalElements: 0 }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = server.address() as AddressInfo;
      await client({ baseUrl: `http://127.0.0.1:${port}/prefix/` }).listTasks();
      const version = (JSON.parse(await readFile('package.json', 'utf8')) as { version: string }).version;
      expect(seen[0]).toMatchObject({ 'x-api-key': KEY, 'user-agent': `df-worker/${version}` });
      expect(paths).toEqual(['/prefix/v1/data-factory/tasks?page=0&size=1000']);
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it.each(['header', 'query', 'bearer'] as const)('authenticates with authMode %s', async (authMode) => {
    const api = client({ authMode });
    emu().createTask({ key: 'enrich' });
    expect(await api.listTasks()).toHaveLength(1);
    expect(emu().requests()[0]!.apiKeyValid).toBe(true);
  });

  it.each(['header', 'query', 'bearer'] as const)(
    'never shows the key in a 401 error or the client with authMode %s',
    async (authMode) => {
      const wrongKey = 'wrong-key-value';
      const { events: emitter, seen: events } = told('response');
      const api = client({ authMode, apiKey: wrongKey, events: emitter });
      const error = (await api.getTask('t1').catch((e: unknown) => e)) as ServiceClientError;
      expect(error).toMatchObject({ status: 401, code: 'UNAUTHENTICATED' });
      expect(error.message).toContain('tasks.get answered 401 (UNAUTHENTICATED)');
      for (const shown of [
        error.message,
        error.stack,
        JSON.stringify(events),
        inspect(api),
        JSON.stringify(api),
      ]) {
        expect(shown).not.toContain(wrongKey);
      }
      expect(inspect(api)).toContain(fx.url);
    },
  );

  it('fails without sending once closed', async () => {
    const api = client();
    await api.close();
    await expect(api.listTasks()).rejects.toThrow(/closed/);
    expect(emu().requests()).toEqual([]);
  });

  it('rejects with the caller abort reason, not a network error', async () => {
    emu().setFaults([{ kind: 'latency', ms: 2000 }]);
    const controller = new AbortController();
    const { events: emitter, seen: events } = told('response');
    const pending = client({ events: emitter }).getTask('t1', controller.signal);
    const reason = new Error('shutting down');
    setImmediate(() => controller.abort(reason));
    await expect(pending).rejects.toBe(reason);
    expect(events).toMatchObject([{ operation: 'tasks.get', status: 0 }]);
    expect(events[0]!.error).toBeUndefined();
  });
});
