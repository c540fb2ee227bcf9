// The connect limit on loopback: a server whose process is stopped, its accept queue full, so the kernel
// answers no more handshakes and a new connection hangs as it would to a host that drops packets.
import { spawn, type ChildProcess } from 'node:child_process';
import { connect, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { ServiceClient } from '../../src/api/client.ts';
import { TimeoutError } from '../../src/api/errors.ts';

let child: ChildProcess | undefined;
const sockets: Socket[] = [];

afterEach(() => {
  for (const socket of sockets.splice(0)) socket.destroy();
  child?.kill('SIGKILL');
  child = undefined;
});

/** A listening port whose process is stopped and whose accept queue is full. */
async function unansweringPort(): Promise<number> {
  const server = spawn(
    process.execPath,
    [
      '-e',
      "const s = require('net').createServer(); s.listen({ port: 0, host: '127.0.0.1', backlog: 1 }, () => console.log(s.address().port));",
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  child = server;
  const port = await new Promise<number>((resolve) =>
    server.stdout.once('data', (d) => resolve(Number(String(d)))),
  );
  server.kill('SIGSTOP');
  // Connections the kernel still completes for the stopped process fill its queue; the first that does not
  // complete within 300 ms shows the queue is full.
  for (let i = 0; i < 16; i++) {
    const socket = connect(port, '127.0.0.1');
    sockets.push(socket);
    socket.on('error', () => {});
    const connected = await new Promise<boolean>((resolve) => {
      socket.once('connect', () => resolve(true));
      setTimeout(() => resolve(false), 300);
    });
    if (!connected) return port;
  }
  throw new Error('the stopped server kept accepting connections');
}

describe('the connect limit', () => {
  it('fails a request whose connection is not made within connectTimeoutMs, naming the setting, unsent', async () => {
    const port = await unansweringPort();
    const client = new ServiceClient({
      baseUrl: `http://127.0.0.1:${port}`,
      apiKey: 'k',
      connectTimeoutMs: 400,
    });
    const startedAt = performance.now();
    const error = await client.listTasks().then(
      () => undefined,
      (failure: unknown) => failure,
    );
    const tookMs = performance.now() - startedAt;
    await client.close();
    expect(error).toBeInstanceOf(TimeoutError);
    expect((error as TimeoutError).phase).toBe('connect');
    expect((error as Error).message).toContain('after 400 ms (DF_API_CONNECT_TIMEOUT_MS)');
    expect(tookMs).toBeGreaterThanOrEqual(390);
    expect(tookMs).toBeLessThan(2_000);
  });
});
