// Failures of a named service host that a loopback server cannot stage, mocked with nock: an https host whose
// connection is reset in the middle of an answer's body, and a host name DNS does not resolve. Each ends as one
// NetworkError that the client does not retry (retrying is the scheduler's decision), that names DF_API_URL
// where the URL is to blame, and that never holds the API key, carried here in the URL (authMode 'query').
// nock (through @mswjs/interceptors) sees a request only once it has been written whole, so every failure it
// stages comes after the request left: that a real DNS failure sends nothing is checked against the machine's
// resolver in network-failure.test.ts.
import { PassThrough } from 'node:stream';
import nock from 'nock';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ServiceClient } from '../../src/api/client.ts';
import { NetworkError, TimeoutError } from '../../src/api/errors.ts';

const ORIGIN = 'https://api.example.com';
const KEY = 'nock-key-5f2a91';
const POLL_PATH = '/v1/data-factory/tasks/t1/poll';
const EXECUTION_PATH = '/v1/data-factory/task-executions/exec-42';
const EXECUTION = {
  object: 'task_execution',
  id: 'exec-42',
  taskId: 't1',
  status: 'IN_PROGRESS',
  createdAt: '2025-01-01T00:00:00Z',
  input: { sku: 'A', note: 'the rest of this body never arrives' },
};

const clients: ServiceClient[] = [];

beforeEach(() => {
  if (!nock.isActive()) nock.activate();
  // Only the mocked host answers: a request that escaped the mocks fails instead of reaching the network.
  nock.disableNetConnect();
  nock.enableNetConnect('127.0.0.1');
});

afterEach(async () => {
  await Promise.all(clients.splice(0).map((client) => client.close()));
  nock.cleanAll();
  nock.enableNetConnect();
  nock.restore();
});

function serviceClient(): ServiceClient {
  const client = new ServiceClient({
    baseUrl: ORIGIN,
    apiKey: KEY,
    authMode: 'query',
    urlSetting: 'DF_API_URL',
  });
  clients.push(client);
  return client;
}

/** How many requests reached `scope`: a retry would make it more than one. */
function requestsTo(scope: nock.Scope): { count: number } {
  const seen = { count: 0 };
  scope.on('request', () => seen.count++);
  return seen;
}

async function networkError(call: Promise<unknown>): Promise<NetworkError> {
  const error = await call.then(
    () => undefined,
    (failure: unknown) => failure,
  );
  expect(error).toBeInstanceOf(NetworkError);
  expect(error).not.toBeInstanceOf(TimeoutError);
  expect((error as Error).message).not.toContain(KEY);
  return error as NetworkError;
}

/**
 * An answer body of which only `sent` arrives before the peer resets the connection. The reset waits for the
 * next turn of the event loop, so the bytes sent are read first.
 */
function resetAfter(sent: string): PassThrough {
  const body = new PassThrough();
  body.write(sent);
  setImmediate(() =>
    body.destroy(Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET', syscall: 'read' })),
  );
  return body;
}

describe('a connection reset in the middle of an answer body', () => {
  const text = JSON.stringify(EXECUTION);
  const firstPart = text.slice(0, text.indexOf('"status"'));
  const headers = { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(text)) };

  it('fails a poll once, keeping its 200 and the body so far: the execution may have been claimed', async () => {
    const scope = nock(ORIGIN)
      .get(POLL_PATH)
      .query({ api_key: KEY })
      .reply(200, () => resetAfter(firstPart), headers);
    const requests = requestsTo(scope);
    const error = await networkError(serviceClient().pollTask('t1'));
    // Node reports a connection closed mid-body as `aborted` with code ECONNRESET, whatever reset it.
    expect(error.message).toBe(
      `tasks.poll lost the rest of its 200 answer from ${ORIGIN} (ECONNRESET: aborted); the request may or may ` +
        'not have been applied. Check the network and DF_API_URL, then retry',
    );
    expect(error).toMatchObject({ operation: 'tasks.poll', sent: true, answerStatus: 200 });
    expect(error.mayHaveBeenApplied).toBe(true);
    // What arrived names the claimed execution: the scheduler can read it back by id rather than lose it.
    expect(error.answerPrefix).toBe(firstPart);
    expect(error.answerPrefix).toContain('"id":"exec-42"');
    expect(requests.count).toBe(1);
  });

  it('fails a report once as possibly applied: the reporter must read the execution back', async () => {
    const scope = nock(ORIGIN)
      .patch(EXECUTION_PATH, { id: 'exec-42', status: 'COMPLETED', output: { ok: true } })
      .query({ api_key: KEY })
      .reply(200, () => resetAfter(firstPart), headers);
    const requests = requestsTo(scope);
    const report = serviceClient().reportExecution('exec-42', { status: 'COMPLETED', output: { ok: true } });
    const error = await networkError(report);
    expect(error.message).toContain(`executions.report lost the rest of its 200 answer from ${ORIGIN}`);
    expect(error.message).toContain('the request may or may not have been applied');
    expect(error).toMatchObject({ operation: 'executions.report', sent: true, answerStatus: 200 });
    expect(error.mayHaveBeenApplied).toBe(true);
    expect(requests.count).toBe(1);
  });
});

describe('a DNS failure for the service host', () => {
  function dnsFailure(code: 'ENOTFOUND' | 'EAI_AGAIN'): Error {
    return Object.assign(new Error(`getaddrinfo ${code} api.example.com`), {
      code,
      syscall: 'getaddrinfo',
      hostname: 'api.example.com',
    });
  }

  it.each([
    {
      code: 'ENOTFOUND' as const,
      cause: 'the host name api.example.com does not resolve (ENOTFOUND)',
      advice: "Check the host in DF_API_URL (a typo?) and that this machine's DNS knows it",
    },
    {
      code: 'EAI_AGAIN' as const,
      cause: 'DNS gave no answer for api.example.com (EAI_AGAIN)',
      advice: "Retry; if it persists, check this machine's DNS and the host in DF_API_URL",
    },
  ])(
    '$code: one NetworkError naming the host and DF_API_URL, not retried',
    async ({ code, cause, advice }) => {
      const scope = nock(ORIGIN)
        .get('/v1/data-factory/tasks')
        .query({ page: '0', size: '1000', api_key: KEY })
        .replyWithError(dnsFailure(code));
      const requests = requestsTo(scope);
      const error = await networkError(serviceClient().listTasks());
      // A real resolver fails before anything is sent ('could not reach'); nock fails a request it has already
      // taken, which the client can only call unanswered ('got no answer from'). The cause and advice are the same.
      expect(error.message).toMatch(
        new RegExp(`^tasks\\.list (could not reach|got no answer from) ${ORIGIN}: `),
      );
      expect(error.message).toContain(`: ${cause}; `);
      expect(error.message.endsWith(`. ${advice}`)).toBe(true);
      // The resolver's own text adds nothing to the advice.
      expect(error.message).not.toContain('getaddrinfo');
      expect(error).toMatchObject({ operation: 'tasks.list', answerStatus: undefined });
      expect((error.cause as { code?: string }).code).toBe(code);
      // EAI_AGAIN advises a retry, which is the caller's to make: the client sent the request once.
      expect(requests.count).toBe(1);
    },
  );
});
