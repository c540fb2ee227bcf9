// A URL pointing at the wrong place, on loopback: each failure names DF_API_URL and what to change in it.
import { createServer as createHttpServer, type Server } from 'node:http';
import { createServer as createTcpServer, type AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { ServiceClient } from '../../src/api/client.ts';
import { NetworkError } from '../../src/api/errors.ts';
import { adviseNetworkFailure } from '../../src/api/network-failure.ts';

const KEY = 'network-failure-key-8d1e';
const clients: ServiceClient[] = [];
const servers: Server[] = [];

afterEach(async () => {
  await Promise.all(clients.splice(0).map((client) => client.close()));
  await Promise.all(servers.splice(0).map((server) => new Promise((resolve) => server.close(resolve))));
});

async function listTasksAt(baseUrl: string): Promise<NetworkError> {
  const client = new ServiceClient({
    baseUrl,
    apiKey: KEY,
    urlSetting: 'DF_API_URL',
    connectTimeoutMs: 5_000,
  });
  clients.push(client);
  const error = await client.listTasks().then(
    () => undefined,
    (failure: unknown) => failure,
  );
  expect(error).toBeInstanceOf(NetworkError);
  expect((error as Error).message).not.toContain(KEY);
  return error as NetworkError;
}

/** A loopback port nothing listens on: bound, then closed. */
async function refusedPort(): Promise<number> {
  const server = createTcpServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe('network failures name DF_API_URL and what to change', () => {
  it('a refused connection: the host and port, and that the service must run there', async () => {
    const port = await refusedPort();
    const error = await listTasksAt(`http://127.0.0.1:${port}`);
    expect(error.message).toBe(
      `tasks.list could not reach http://127.0.0.1:${port}: nothing accepts connections at 127.0.0.1:${port} ` +
        '(ECONNREFUSED); the request was not sent. Check the host and port in DF_API_URL, and that the service ' +
        '(or the emulator) runs there',
    );
  });

  it('https to a plain HTTP server: the scheme is likely wrong, with the http:// URL to use', async () => {
    const server = createHttpServer((_request, response) => response.end('{}'));
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    const error = await listTasksAt(`https://127.0.0.1:${port}`);
    expect(error.message).toMatch(
      new RegExp(
        `^tasks\\.list could not reach https://127\\.0\\.0\\.1:${port}: the server at 127\\.0\\.0\\.1:${port} does ` +
          `not speak TLS \\(\\w+\\); the request was not sent\\. The scheme is likely wrong: DF_API_URL should ` +
          `start with http:// \\(http://127\\.0\\.0\\.1:${port}\\), or point at the service's https port$`,
      ),
    );
    expect(error.message).not.toMatch(/SSL routines|openssl/i);
  });

  it('a host that does not resolve: check the host for a typo', async () => {
    const error = await listTasksAt('https://df-worker-no-such-host.invalid');
    const prefix = 'tasks.list could not reach https://df-worker-no-such-host.invalid: ';
    // A machine without a DNS server answers EAI_AGAIN (no answer) where one with DNS answers ENOTFOUND.
    expect([
      `${prefix}the host name df-worker-no-such-host.invalid does not resolve (ENOTFOUND); the request was ` +
        "not sent. Check the host in DF_API_URL (a typo?) and that this machine's DNS knows it",
      `${prefix}DNS gave no answer for df-worker-no-such-host.invalid (EAI_AGAIN); the request was not sent. ` +
        "Retry; if it persists, check this machine's DNS and the host in DF_API_URL",
    ]).toContain(error.message);
  });
});

describe('adviseNetworkFailure', () => {
  it('keeps the error text for codes that say nothing about the URL', () => {
    expect(adviseNetworkFailure('ETIMEDOUT', 'https://api.example.com', 'DF_API_URL', false)).toBeUndefined();
    expect(adviseNetworkFailure(undefined, 'https://api.example.com', 'DF_API_URL', false)).toBeUndefined();
  });

  it('says a certificate is not trusted, pointing at NODE_EXTRA_CA_CERTS', () => {
    expect(
      adviseNetworkFailure('SELF_SIGNED_CERT_IN_CHAIN', 'https://api.example.com', 'DF_API_URL', false),
    ).toEqual({
      cause: 'the TLS certificate of api.example.com is not trusted (SELF_SIGNED_CERT_IN_CHAIN)',
      advice:
        'Check the host in DF_API_URL; for a certificate of a private authority, set NODE_EXTRA_CA_CERTS to its PEM file',
    });
  });

  it('names the setting it is given (a library user sets baseUrl)', () => {
    expect(adviseNetworkFailure('ECONNREFUSED', 'http://h:1', 'baseUrl', false)?.advice).toContain(
      'in baseUrl',
    );
  });
});
