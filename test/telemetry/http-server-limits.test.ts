// What one client, or many, can cost the worker's HTTP server, over loopback with raw sockets: one /metrics
// rendering per interval, the connection cap and who gives way to a newcomer, and the bound on every wait.
import { connect, type Socket } from 'node:net';
import { request } from 'node:http';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { pino } from 'pino';
import {
  WorkerHttpServer,
  type HttpServerOptions,
  type ProbeSource,
} from '../../src/telemetry/http-server.ts';

let server: WorkerHttpServer | undefined;
const sockets: Socket[] = [];
afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.destroy();
  await server?.close();
  server = undefined;
});

function source(metrics: () => Promise<string> = () => Promise.resolve('dfworker_ready 1\n')): ProbeSource {
  return {
    readiness: () => ({ ready: true, checks: {} }),
    wake: () => 0,
    metrics,
    metricsContentType: 'text/plain; version=0.0.4; charset=utf-8',
  };
}

async function start(probe: ProbeSource, options: Partial<HttpServerOptions> = {}): Promise<URL> {
  server = new WorkerHttpServer(probe, {
    port: 0,
    host: '127.0.0.1',
    wake: 'off',
    logger: pino({ level: 'silent' }),
    ...options,
  });
  return new URL(await server.listen());
}

/** A raw client socket: what it received, and whether the server closed it. */
interface RawClient {
  socket: Socket;
  received: () => string;
  closed: Promise<void>;
}

async function open(url: URL): Promise<RawClient> {
  const socket = connect({ host: url.hostname, port: Number(url.port) });
  sockets.push(socket);
  let text = '';
  socket.setEncoding('latin1').on('data', (chunk: string) => (text += chunk));
  socket.on('error', () => undefined);
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  return { socket, received: () => text, closed };
}

/** Sends a keep-alive GET and waits for its whole answer (the server sends a Content-Length). */
async function get(client: RawClient, path: string): Promise<string> {
  const before = client.received().length;
  client.socket.write(`GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`);
  await vi.waitFor(
    () => {
      const answer = client.received().slice(before);
      const end = answer.indexOf('\r\n\r\n');
      const length = Number(/content-length: (\d+)/i.exec(answer)?.[1]);
      expect(end >= 0 && answer.length >= end + 4 + length).toBe(true);
    },
    { timeout: 5_000, interval: 5 },
  );
  return client.received().slice(before);
}

/** A probe as the kubelet sends it: a new connection, `Connection: close`. */
function probe(url: URL, path = '/healthz'): Promise<{ status: number } | { error: string }> {
  return new Promise((resolve) => {
    const req = request(new URL(path, url), { agent: false, headers: { connection: 'close' } }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode ?? 0 }));
    });
    req.setTimeout(5_000, () => req.destroy(new Error('timeout')));
    req.on('error', (error: NodeJS.ErrnoException) => resolve({ error: error.code ?? error.message }));
    req.end();
  });
}

describe('the /metrics rendering', () => {
  it('is shared by 50 concurrent scrapers: one rendering, the same bytes, with their length', async () => {
    let renders = 0;
    const url = await start(
      source(() => {
        renders++;
        return new Promise((resolve) => setTimeout(() => resolve(`dfworker_renders ${renders}\n`), 50));
      }),
    );
    const answers = await Promise.all(Array.from({ length: 50 }, () => fetch(new URL('/metrics', url))));
    const bodies = await Promise.all(answers.map((answer) => answer.text()));
    expect(renders).toBe(1);
    expect(new Set(bodies)).toEqual(new Set(['dfworker_renders 1\n']));
    expect(answers[0]!.headers.get('content-length')).toBe(String('dfworker_renders 1\n'.length));
  });
});

describe('the connection cap', () => {
  it('lets a newcomer over the cap take the place of the keep-alive connection idle longest, and warns once', async () => {
    const logs: Record<string, unknown>[] = [];
    const logger = pino(
      { level: 'warn' },
      { write: (line: string) => logs.push(JSON.parse(line) as Record<string, unknown>) },
    );
    const url = await start(source(), { maxConnections: 3, logger });
    const clients: RawClient[] = [];
    for (let i = 0; i < 3; i++) {
      const client = await open(url);
      expect(await get(client, '/healthz')).toMatch(/^HTTP\/1\.1 200/);
      clients.push(client);
    }
    expect(await probe(url)).toEqual({ status: 200 });
    await clients[0]!.closed;
    expect(clients[1]!.socket.destroyed || clients[2]!.socket.destroyed).toBe(false);
    expect(server!.connectionFigures()).toMatchObject({ evicted: 1, refused: 0 });
    expect(await probe(url)).toEqual({ status: 200 });
    // Once a minute at most, however many newcomers the cap turns away meanwhile.
    expect(logs).toEqual([
      expect.objectContaining({ maxConnections: 3, idleClosedForNewcomers: 1, newcomersClosed: 0 }),
    ]);
  });

  it('lets a probe in past sockets that connect and never send, closing the oldest of them', async () => {
    const url = await start(source(), { maxConnections: 3 });
    const silent: RawClient[] = [];
    for (let i = 0; i < 3; i++) silent.push(await open(url));
    await vi.waitFor(() => expect(server!.connectionFigures().open).toBe(3));
    expect(await probe(url)).toEqual({ status: 200 });
    await silent[0]!.closed;
    expect(silent[0]!.received()).toBe('');
  });

  it('keeps a newcomer waiting, unread, while every connection has a request in progress, then lets it in', async () => {
    let release!: (text: string) => void;
    const rendering = new Promise<string>((resolve) => (release = resolve));
    const url = await start(
      source(() => rendering),
      { maxConnections: 2 },
    );
    const busy = [await open(url), await open(url)];
    const answers = busy.map((client) => get(client, '/metrics'));
    await vi.waitFor(() => expect(server!.connectionFigures().busy).toBe(2));
    const probed = probe(url);
    await vi.waitFor(() => expect(server!.connectionFigures().waiting).toBe(1));
    release('dfworker_ready 1\n');
    for (const answer of await Promise.all(answers)) expect(answer).toMatch(/^HTTP\/1\.1 200/);
    // It took the place of a connection whose answer was out: waiting, it sent nothing, and closed, it would
    // have reconnected at once (a flood's clients do).
    expect(await probed).toEqual({ status: 200 });
    expect(server!.connectionFigures()).toMatchObject({ waiting: 0, refused: 0, evicted: 1 });
  });

  it('closes a newcomer at once past the line, and one that waited the headers timeout', async () => {
    const url = await start(
      source(() => new Promise<string>(() => undefined)),
      { maxConnections: 1, lineLength: 1, clientLimits: { headersTimeoutMs: 400, checkEveryMs: 100 } },
    );
    const holder = await open(url);
    holder.socket.write('GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n');
    await vi.waitFor(() => expect(server!.connectionFigures().busy).toBe(1));
    const waiterAt = performance.now();
    const waiter = await open(url);
    await vi.waitFor(() => expect(server!.connectionFigures().waiting).toBe(1));
    const startedAt = performance.now();
    const refused = await probe(url);
    expect(refused).toHaveProperty('error');
    // Closed, not queued: well under kubelet's 1 s probe timeout even on a loaded machine.
    expect(performance.now() - startedAt).toBeLessThan(500);
    expect(server!.connectionFigures()).toMatchObject({ refused: 1 });
    await waiter.closed;
    // It waited its bound (400 ms from its connection), unanswered.
    expect(performance.now() - waiterAt).toBeGreaterThanOrEqual(390);
    expect(waiter.received()).toBe('');
    await vi.waitFor(() => expect(server!.connectionFigures().waiting).toBe(0));
  });
});

describe('the answers per second', () => {
  it('answers 20 at once, then 20 a second: 60 requests of 10 keep-alive clients take 2 s', async () => {
    const url = await start(source(), { maxRequestsPerSecond: 20 });
    const clients = await Promise.all(Array.from({ length: 10 }, () => open(url)));
    const answeredAt: number[] = [];
    const startedAt = performance.now();
    await Promise.all(
      clients.map(async (client) => {
        for (let i = 0; i < 6; i++) {
          expect(await get(client, '/healthz')).toMatch(/^HTTP\/1\.1 200/);
          answeredAt.push(performance.now() - startedAt);
        }
      }),
    );
    const elapsedMs = performance.now() - startedAt;
    // The 40 past the burst come at 20 a second.
    expect(elapsedMs).toBeGreaterThanOrEqual(1_900);
    expect(answeredAt.filter((at) => at < 1_000).length).toBeLessThanOrEqual(40);
    expect(answeredAt).toHaveLength(60);
  }, 20_000);
});

describe('the bound on every wait', () => {
  const limits = { headersTimeoutMs: 300, requestTimeoutMs: 600, keepAliveTimeoutMs: 200, checkEveryMs: 50 };

  it('cuts a client trickling its request headers once the headers timeout passed', async () => {
    const url = await start(source(), { clientLimits: limits });
    const slowloris = await open(url);
    const startedAt = performance.now();
    const header =
      'GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy';
    let at = 0;
    const trickle = setInterval(() => slowloris.socket.write(header[at++ % header.length]!), 20);
    await slowloris.closed;
    clearInterval(trickle);
    const elapsedMs = performance.now() - startedAt;
    expect(elapsedMs).toBeGreaterThanOrEqual(250);
    expect(elapsedMs).toBeLessThan(3_000);
    expect(slowloris.received()).toMatch(/^HTTP\/1\.1 408/);
  });

  it('closes a keep-alive connection left idle for the keep-alive timeout', async () => {
    const url = await start(source(), { clientLimits: limits });
    const client = await open(url);
    await get(client, '/healthz');
    const answeredAt = performance.now();
    await client.closed;
    expect(performance.now() - answeredAt).toBeLessThan(3_000);
    await vi.waitFor(() => expect(server!.connectionFigures().open).toBe(0));
  });

  it('answers 431 to request headers over 8 KB, and closes the connection', async () => {
    const url = await start(source());
    const client = await open(url);
    client.socket.write(`GET /healthz HTTP/1.1\r\nHost: x\r\nX-Padding: ${'y'.repeat(12 * 1024)}\r\n\r\n`);
    await client.closed;
    expect(client.received()).toMatch(/^HTTP\/1\.1 431/);
  });
});
