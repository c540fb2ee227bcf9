// The transport's time limits against a loopback server in another thread, while this thread's event loop is
// blocked as a stuck handler would block it: an answer that arrived in time is read, whatever the timers say
// once the loop runs again.
import { afterEach, describe, expect, it } from 'vitest';
import { setImmediate as nextLoopTurn, setTimeout as delay } from 'node:timers/promises';
import { ServiceClient, type ServiceClientOptions } from '../../src/api/client.ts';
import { NetworkError, TimeoutError } from '../../src/api/errors.ts';
import { AnswerServer, blockEventLoop, type AnswerScript } from './answer-server.ts';
import { failure } from './emulator-fixture.ts';

const EXECUTION = {
  object: 'task_execution',
  id: 'e1',
  taskId: 't1',
  status: 'IN_PROGRESS',
  createdAt: '2025-01-01T00:00:00Z',
  input: { sku: 'A' },
};

const opened: { close(): Promise<void> }[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((o) => o.close()));
});

async function serve(script: Partial<AnswerScript>): Promise<{ server: AnswerServer; url: string }> {
  const server = new AnswerServer({
    status: 200,
    body: JSON.stringify(EXECUTION),
    headersAfterMs: 0,
    bodyAfterMs: 0,
    ...script,
  });
  opened.push(server);
  return { server, url: await server.listen() };
}

function client(url: string, options: Partial<ServiceClientOptions>): ServiceClient {
  const created = new ServiceClient({ baseUrl: url, apiKey: 'k1-secret-key', ...options });
  opened.push(created);
  return created;
}

/**
 * Blocks the loop for `ms` once `afterMs` have passed. The block starts from the check phase, as a handler
 * resumed by I/O or an immediate would: one started inside a timer callback ends with the loop's clock not yet
 * updated, so the due timers wait for the next turn and the sockets are read first, hiding the race.
 */
async function blockLaterFor(afterMs: number, ms: number): Promise<void> {
  await delay(afterMs);
  await nextLoopTurn();
  blockEventLoop(ms);
}

describe('a poll answer that arrives while the event loop is blocked', () => {
  it('is delivered although the loop resumes after requestTimeoutMs', async () => {
    const { server, url } = await serve({ headersAfterMs: 300 });
    const polling = client(url, { requestTimeoutMs: 500 }).pollTask('t1');
    await server.received();
    // The answer arrives 300 ms in, while the loop is held until well past the 500 ms deadline.
    blockEventLoop(1_500);
    await expect(polling).resolves.toMatchObject({ id: 'e1', input: { sku: 'A' } });
  });

  it('is delivered although headersTimeoutMs falls due during the block', async () => {
    const { server, url } = await serve({ headersAfterMs: 600 });
    const polling = client(url, { headersTimeoutMs: 900, requestTimeoutMs: 10_000 }).pollTask('t1');
    await server.received();
    // Blocked from 500 ms in: the headers arrive at 600 ms, within the limit, but are read only after it.
    await blockLaterFor(500, 1_500);
    await expect(polling).resolves.toMatchObject({ id: 'e1' });
  });

  it('is delivered although bodyTimeoutMs falls due during the block', async () => {
    const { server, url } = await serve({ bodyAfterMs: 600 });
    const polling = client(url, { bodyTimeoutMs: 900, requestTimeoutMs: 10_000 }).pollTask('t1');
    await server.received();
    await blockLaterFor(500, 1_500);
    await expect(polling).resolves.toMatchObject({ id: 'e1' });
  });

  it('is read to its end after requestTimeoutMs while its body keeps coming', async () => {
    // Headers at once, the rest of the body 800 ms later: past the deadline, within the body's idle limit.
    const { url } = await serve({ bodyAfterMs: 800 });
    const polled = await client(url, { requestTimeoutMs: 500 }).pollTask('t1');
    expect(polled).toMatchObject({ id: 'e1' });
  });
});

describe('a poll answer that is lost', () => {
  it('fails with a body TimeoutError carrying the 200 when the body stops halfway', async () => {
    const { url } = await serve({ bodyAfterMs: 'never' });
    const error = await failure(client(url, { bodyTimeoutMs: 200 }).pollTask('t1'), TimeoutError);
    expect(error).toMatchObject({ phase: 'body', sent: true, answerStatus: 200, mayHaveBeenApplied: true });
    expect(error.message).toContain('raise DF_API_BODY_TIMEOUT_MS');
  });

  it('fails with a headers TimeoutError that says the poll was sent', async () => {
    const { url } = await serve({ headersAfterMs: 10_000 });
    const error = await failure(client(url, { headersTimeoutMs: 200 }).pollTask('t1'), TimeoutError);
    expect(error).toMatchObject({ phase: 'headers', sent: true, answerStatus: undefined });
    expect(error.mayHaveBeenApplied).toBe(true);
  });

  it('fails at requestTimeoutMs when no answer starts, saying the poll was sent', async () => {
    const { url } = await serve({ headersAfterMs: 10_000 });
    const error = await failure(client(url, { requestTimeoutMs: 200 }).pollTask('t1'), TimeoutError);
    expect(error).toMatchObject({ phase: 'request', sent: true, mayHaveBeenApplied: true });
  });

  it('fails with a NetworkError that says the poll was sent when the connection closes before the answer', async () => {
    const { url } = await serve({ headersAfterMs: 'drop' });
    const error = await failure(client(url, {}).pollTask('t1'), NetworkError);
    expect(error).not.toBeInstanceOf(TimeoutError);
    expect(error).toMatchObject({ sent: true, answerStatus: undefined, mayHaveBeenApplied: true });
    expect(error.message).toMatch(/got no answer from .*the request may or may not have been applied/);
  });

  it('keeps the 200 when the connection closes halfway through the body', async () => {
    const { url } = await serve({ bodyAfterMs: 'drop' });
    const error = await failure(client(url, {}).pollTask('t1'), NetworkError);
    expect(error).toMatchObject({ sent: true, answerStatus: 200, mayHaveBeenApplied: true });
    expect(error.message).toContain('lost the rest of its 200 answer');
  });

  it('does not count a cut-short 404 as applied: the service said nothing was pending', async () => {
    const { url } = await serve({
      status: 404,
      body: '{"code":"NOT_FOUND","message":"none"}',
      bodyAfterMs: 'drop',
    });
    const error = await failure(client(url, {}).pollTask('t1'), NetworkError);
    expect(error).toMatchObject({ sent: true, answerStatus: 404, mayHaveBeenApplied: false });
  });

  it('says a poll that could not connect was not sent', async () => {
    const { server, url } = await serve({});
    await server.close();
    const error = await failure(client(url, {}).pollTask('t1'), NetworkError);
    expect(error).toMatchObject({ sent: false, mayHaveBeenApplied: false });
    expect(error.message).toMatch(/could not reach .*ECONNREFUSED.*the request was not sent/);
  });
});
