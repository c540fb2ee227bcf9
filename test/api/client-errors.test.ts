import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import type { ServiceClientOptions } from '../../src/api/client.ts';
import {
  NetworkError,
  ResponseValidationError,
  ServiceClientError,
  ServiceError,
  TimeoutError,
} from '../../src/api/errors.ts';
import { failure, KEY, told, useEmulatorAndClients } from './emulator-fixture.ts';
import type { FaultRule } from '../../src/emulator/index.ts';

const fx = useEmulatorAndClients({ maxUploadBytes: 1024 });
const emu = () => fx.emu;

const client = (options: Partial<ServiceClientOptions> = {}) => fx.client(options);

function forcePoll(status: number, body: string, contentType = 'application/json'): void {
  emu().setFaults([{ operation: 'tasks.poll', kind: 'status', status, body, contentType, count: 1 }]);
}

describe('ServiceClient error answers', () => {
  it('turns a 404 on getTask into a ServiceError, not null', async () => {
    const error = await failure(client().getTask('missing'), ServiceError);
    expect(error).toMatchObject({ operation: 'tasks.get', status: 404, code: 'NOT_FOUND', retryable: false });
    expect(error.message).toMatch(/^tasks\.get answered 404 \(NOT_FOUND\): /);
  });

  it('carries the 412 envelope code and message', async () => {
    const body = JSON.stringify({
      code: 'PRECONDITION_FAILED',
      message: 'version differs',
      httpStatusCode: 412,
    });
    emu().setFaults([{ kind: 'status', status: 412, body, contentType: 'application/json' }]);
    const error = await failure(client().getTask('t1'), ServiceError);
    expect(error).toMatchObject({
      status: 412,
      code: 'PRECONDITION_FAILED',
      serviceMessage: 'version differs',
    });
  });

  it('reads the {message}-only 413 of an upload over the size limit', async () => {
    const upload = client().uploadFile({ name: 'big.bin', data: new Uint8Array(4096) });
    const error = await failure(upload, ServiceError);
    expect(error).toMatchObject({
      operation: 'files.upload',
      status: 413,
      code: undefined,
      retryable: false,
    });
    expect(error.serviceMessage).toEqual(expect.any(String));
    expect(error.message).toContain('files.upload answered 413: ');
  });

  it('reads the {message}-only 400 shape', async () => {
    emu().setFaults([{ kind: 'status', status: 400, body: '{"message":"size must be at most 1000"}' }]);
    const error = await failure(client().listTasks(), ServiceError);
    expect(error).toMatchObject({
      status: 400,
      code: undefined,
      serviceMessage: 'size must be at most 1000',
    });
  });

  it('gives retryAfterMs from a 429 Retry-After, and none without the header', async () => {
    emu().setFaults([{ operation: 'executions.report', kind: 'rateLimit', retryAfterSeconds: 7, count: 1 }]);
    const api = client();
    const report = { status: 'COMPLETED', output: {} } as const;
    const limited = await failure(api.reportExecution('e1', report), ServiceError);
    expect(limited).toMatchObject({ status: 429, code: 'RATE_LIMIT', retryAfterMs: 7000, retryable: true });
    expect(limited.message).toContain('Retry-After: 7 s');
    emu().setFaults([{ kind: 'rateLimit' }]);
    const bare = await failure(api.reportExecution('e1', report), ServiceError);
    expect(bare).toMatchObject({ status: 429, retryAfterMs: undefined, retryable: true });
  });

  it('reports a 503 envelope as a retryable ServiceError', async () => {
    emu().setFaults([{ kind: 'status', status: 503 }]);
    const error = await failure(client().pollTask('t1'), ServiceError);
    expect(error).toMatchObject({ operation: 'tasks.poll', status: 503, code: 'INTERNAL', retryable: true });
    expect(error.message).toMatch(
      /^tasks\.poll answered 503 \(INTERNAL\): .+; the service failed to answer, retry later$/,
    );
  });

  it('keeps a snippet of a proxy HTML page instead of crashing', async () => {
    forcePoll(502, '<html>bad gateway</html>', 'text/html');
    const error = await failure(client().pollTask('t1'), ServiceError);
    expect(error).toMatchObject({ status: 502, code: undefined, bodySnippet: '<html>bad gateway</html>' });
    expect(error.message).toBe(
      'tasks.poll answered 502 with a non-JSON body: <html>bad gateway</html>; the service failed to answer, retry later',
    );
  });

  it('describes an empty error body', async () => {
    emu().setFaults([{ kind: 'status', status: 500, body: '' }]);
    const error = await failure(client().getTask('t1'), ServiceError);
    expect(error).toMatchObject({ status: 500, bodySnippet: '', retryable: true });
    expect(error.message).toContain('tasks.get answered 500 with an empty body');
  });

  it('treats a 404 HTML page on poll as an error, not as "nothing pending"', async () => {
    forcePoll(404, '<html>not here</html>', 'text/html');
    await failure(client().pollTask('t1'), ServiceError);
  });

  it('treats a poll 404 envelope with another code as an error', async () => {
    forcePoll(404, JSON.stringify({ code: 'GONE_AWAY', message: 'x' }));
    expect(await failure(client().pollTask('t1'), ServiceError)).toMatchObject({ code: 'GONE_AWAY' });
  });
});

describe('ServiceClient response validation', () => {
  const execution = { object: 'task_execution', id: 'e1', taskId: 't1', status: 'IN_PROGRESS', input: {} };

  it('rejects a poll answer without an id', async () => {
    forcePoll(200, JSON.stringify({ ...execution, id: undefined }));
    const { events: emitter, seen: events } = told('response');
    const error = await failure(client({ events: emitter }).pollTask('t1'), ResponseValidationError);
    expect(error).toMatchObject({ operation: 'tasks.poll', field: 'id' });
    expect(error.message).toContain("tasks.poll answer lacks string field 'id'");
    expect(events).toMatchObject([{ status: 200, error }]);
  });

  it('rejects a poll answer whose input is not an object', async () => {
    forcePoll(200, JSON.stringify({ ...execution, input: 'sku=A' }));
    expect(await failure(client().pollTask('t1'), ResponseValidationError)).toMatchObject({ field: 'input' });
  });

  it('rejects a 2xx answer that is not JSON', async () => {
    forcePoll(200, '<html>ok</html>', 'text/html');
    expect(await failure(client().pollTask('t1'), ResponseValidationError)).toMatchObject({
      field: '(body)',
    });
  });

  it('tells the user to check DF_API_URL, or the setting the client was told, on a wrong-shape answer', async () => {
    forcePoll(200, '<html>ok</html>', 'text/html');
    const daemon = await failure(client().pollTask('t1'), ResponseValidationError);
    expect(daemon).toMatchObject({ code: 'DFW_API_BAD_ANSWER', urlSetting: 'DF_API_URL' });
    expect(daemon.message).toContain('check DF_API_URL and report this if it persists');
    expect(daemon.message).not.toContain('baseUrl');
    emu().setFaults([{ operation: 'tasks.get', kind: 'status', status: 200, body: '{}', count: 1 }]);
    const named = await failure(client({ urlSetting: 'SERVICE_URL' }).getTask('t1'), ResponseValidationError);
    expect(named).toMatchObject({ operation: 'tasks.get', urlSetting: 'SERVICE_URL' });
    expect(named.message).toContain('check SERVICE_URL and report this if it persists');
  });
});

describe('ServiceClient network failures', () => {
  it('times out waiting for headers with a TimeoutError', async () => {
    // The answer comes long after the limit, so no scheduling delay on a busy machine can let it through.
    emu().setFaults([{ kind: 'latency', ms: 4000 }]);
    const { events: emitter, seen: events } = told('response');
    const api = client({ headersTimeoutMs: 50, events: emitter });
    const error = await failure(api.getTask('t1'), TimeoutError);
    expect(error).toBeInstanceOf(NetworkError);
    expect(error).toMatchObject({ operation: 'tasks.get', phase: 'headers' });
    expect(error.code).toBe('DFW_API_TIMEOUT');
    expect(error.message).toContain('after 50 ms (DF_API_HEADERS_TIMEOUT_MS)');
    expect(error.message).not.toContain('headersTimeoutMs');
    expect(events).toMatchObject([{ operation: 'tasks.get', status: 0, error }]);
  });

  it('times out at the overall request deadline', async () => {
    emu().setFaults([{ kind: 'latency', ms: 4000 }]);
    const error = await failure(client({ requestTimeoutMs: 50 }).getTask('t1'), TimeoutError);
    expect(error.phase).toBe('request');
  });

  it('fails with a NetworkError, not a timeout, when the connection is refused', async () => {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    await new Promise((resolve) => server.close(resolve));
    const error = await failure(client({ baseUrl: `http://127.0.0.1:${port}` }).listTasks(), NetworkError);
    expect(error).not.toBeInstanceOf(TimeoutError);
    expect(error.message).toContain('ECONNREFUSED');
    expect(error.message).not.toContain(KEY);
  });

  it('fails with a NetworkError when the socket closes before the answer', async () => {
    emu().setFaults([{ kind: 'drop' }]);
    await failure(client().getTask('t1'), NetworkError);
  });

  it('fails with a NetworkError although the report was applied when the answer is lost', async () => {
    const task = emu().createTask({ key: 'enrich' });
    const queued = emu().enqueueExecution(task.id, { sku: 'A' });
    emu().setFaults([{ operation: 'executions.report', kind: 'dropAfterApply' }]);
    const report = client({ authMode: 'query' }).reportExecution(queued.id, {
      status: 'FAILED',
      output: { e: 1 },
    });
    const error = await failure(report, NetworkError);
    expect(error.message).not.toContain(KEY);
    expect(emu().executions()[0]).toMatchObject({
      status: 'FAILED',
      reports: [{ status: 'FAILED', output: { e: 1 } }],
    });
  });

  it('gives every failure a common ServiceClientError base', async () => {
    emu().setFaults([
      { kind: 'drop', count: 1 },
      { kind: 'status', status: 500 },
    ] satisfies FaultRule[]);
    const api = client();
    await failure(api.getTask('t1'), ServiceClientError);
    await failure(api.getTask('t1'), ServiceClientError);
  });
});
