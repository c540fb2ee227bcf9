// The thread behind AnswerServer: a loopback HTTP server with an event loop of its own, so it answers on
// schedule while the test's own loop is blocked. Plain Node (no vitest transform): node: imports only.
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parentPort, workerData } from 'node:worker_threads';
import type { AnswerScript, ThreadMessage } from './answer-server.ts';

const script = workerData as AnswerScript;
const port = parentPort;
if (port === null) throw new Error('answer-server-thread.ts runs as a worker thread');

const server = createServer((request, response) => {
  request.resume();
  request.on('end', () => {
    const arrived: ThreadMessage = {
      type: 'received',
      method: request.method ?? '',
      path: request.url ?? '',
    };
    port.postMessage(arrived);
    if (script.headersAfterMs === 'drop') response.socket?.destroy();
    else setTimeout(() => answer(response), script.headersAfterMs);
  });
});

function answer(response: ServerResponse): void {
  const body = Buffer.from(script.body);
  response.writeHead(script.status, { 'content-type': 'application/json', 'content-length': body.length });
  const { bodyAfterMs } = script;
  if (bodyAfterMs === 0) {
    response.end(body);
    return;
  }
  // Headers and the first half of the body leave now; the rest later, or never.
  response.write(body.subarray(0, Math.floor(body.length / 2)));
  if (bodyAfterMs === 'drop') setImmediate(() => response.socket?.destroy());
  else if (bodyAfterMs !== 'never')
    setTimeout(() => response.end(body.subarray(Math.floor(body.length / 2))), bodyAfterMs);
}

server.listen(0, '127.0.0.1', () => {
  const listening: ThreadMessage = { type: 'listening', port: (server.address() as AddressInfo).port };
  port.postMessage(listening);
});
