// The flood of the metrics-flood scenarios, run as a child process of its own so that its CPU is not the test
// process's: many HTTP/1.1 keep-alive clients hammering /metrics and /healthz on loopback, each sending its
// next request as soon as the last answer is in, and reconnecting at once when the server closes on it.
// Optionally hostile sockets too: slowloris (headers a byte at a time), silent ones, oversized headers.
//   node metrics-flood-client.ts '{"url":"http://127.0.0.1:9464","clients":500,"durationMs":8000}'
// Prints `ready` once loaded, floods from a `go` line on stdin for durationMs, then prints one JSON line of
// FloodFigures and exits. It exits on its own 5 s after the flood should have ended, whatever happens.
import { connect, type Socket } from 'node:net';
import { createInterface } from 'node:readline';

export interface FloodOptions {
  /** Base URL of the daemon's HTTP server; loopback only. */
  url: string;
  /** Clients in keep-alive loops, alternately on /metrics and /healthz. */
  clients: number;
  durationMs: number;
  /** Sockets that send their request headers one byte a second and never finish them. */
  slowloris?: number;
  /** Sockets that connect and never send a byte. */
  silent?: number;
  /** Clients that keep sending requests with 64 KB of headers (their figures: path `oversized headers`). */
  hugeHeaders?: number;
}

export interface PathFigures {
  sent: number;
  /** Answers by status code. */
  answers: Record<string, number>;
  /** Slowest answer, request written to last byte, as the flooder measured it (its own load included). */
  slowestMs: number;
  /** The 99th percentile of those times: one late turn of the flooder's own loop does not move it. */
  p99Ms: number;
}

export interface FloodFigures {
  /** From `go` to the last client stopped. */
  elapsedMs: number;
  connections: number;
  /** Connections closed by the server before the answer to a request written on them came. */
  closedBeforeAnswer: number;
  /** Connections that failed to open or were reset. */
  errors: number;
  paths: Record<string, PathFigures>;
}

const options = JSON.parse(process.argv[2] ?? '{}') as FloodOptions;
const target = new URL(options.url);
if (target.hostname !== '127.0.0.1' && target.hostname !== 'localhost') {
  throw new Error(`the flood targets loopback only, not ${target.hostname}`);
}
const port = Number(target.port);
const figures: FloodFigures = { elapsedMs: 0, connections: 0, closedBeforeAnswer: 0, errors: 0, paths: {} };
let stopping = false;
const sockets = new Set<Socket>();

function pathFigures(path: string): PathFigures {
  figures.paths[path] ??= { sent: 0, answers: {}, slowestMs: 0, p99Ms: 0 };
  return figures.paths[path];
}

/** Each path's answer times, for its p99. */
const times = new Map<string, number[]>();

function open(): Socket {
  const socket = connect({ host: '127.0.0.1', port });
  figures.connections++;
  sockets.add(socket);
  socket.on('close', () => sockets.delete(socket));
  socket.on('error', () => figures.errors++);
  return socket;
}

/** One keep-alive client: a request, its whole answer, the next request; a new connection when closed. */
function keepAliveClient(path: string, extraHeaders = '', label = path): void {
  if (stopping) return;
  const socket = open();
  const request = `GET ${path} HTTP/1.1\r\nHost: ${target.host}\r\n${extraHeaders}\r\n`;
  const stats = pathFigures(label);
  let buffered: Buffer = Buffer.alloc(0);
  let sentAt = 0;
  let awaiting = false;
  const send = () => {
    if (stopping) return void socket.destroy();
    sentAt = performance.now();
    awaiting = true;
    stats.sent++;
    socket.write(request);
  };
  socket.on('connect', send);
  socket.on('data', (chunk: Buffer) => {
    buffered = buffered.length === 0 ? chunk : Buffer.concat([buffered, chunk]);
    for (;;) {
      const end = buffered.indexOf('\r\n\r\n');
      if (end < 0) return;
      const head = buffered.subarray(0, end).toString('latin1');
      const bodyEnd = answerEnd(head, buffered, end + 4);
      if (bodyEnd < 0) return;
      buffered = buffered.subarray(bodyEnd);
      const status = head.slice(9, 12);
      stats.answers[status] = (stats.answers[status] ?? 0) + 1;
      const ms = performance.now() - sentAt;
      stats.slowestMs = Math.max(stats.slowestMs, ms);
      let seen = times.get(label);
      if (!seen) times.set(label, (seen = []));
      seen.push(ms);
      awaiting = false;
      if (/\r\nconnection: *close/i.test(head)) return void socket.end();
      send();
    }
  });
  socket.on('close', () => {
    if (awaiting) figures.closedBeforeAnswer++;
    setImmediate(() => keepAliveClient(path, extraHeaders, label));
  });
}

/** Where the answer whose head ends at `bodyStart` ends in `buffered`; -1 while it is incomplete. */
function answerEnd(head: string, buffered: Buffer, bodyStart: number): number {
  if (/\r\ntransfer-encoding: *chunked/i.test(head)) {
    // Enough for these servers' answers: the chunks' end marker does not occur in their bodies.
    const last = buffered.indexOf('\r\n0\r\n\r\n', bodyStart);
    return last < 0 ? -1 : last + 7;
  }
  const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
  return buffered.length < bodyStart + length ? -1 : bodyStart + length;
}

/** Request headers a byte a second, never finished; reconnects when the server gives up on it. */
function slowlorisClient(): void {
  if (stopping) return;
  const socket = open();
  const text = `GET /metrics HTTP/1.1\r\nHost: ${target.host}\r\n${'X-Padding: y\r\n'.repeat(1_000)}`;
  let at = 0;
  const timer = setInterval(() => {
    if (!socket.destroyed) socket.write(text[at++ % text.length]!);
  }, 1_000);
  socket.on('connect', () => socket.write('G'));
  socket.on('close', () => {
    clearInterval(timer);
    setTimeout(slowlorisClient, 10);
  });
}

function silentClient(): void {
  if (stopping) return;
  open().on('close', () => setTimeout(silentClient, 10));
}

function flood(): void {
  const startedAt = performance.now();
  const paths = ['/metrics', '/healthz'];
  for (let i = 0; i < options.clients; i++) keepAliveClient(paths[i % 2]!);
  for (let i = 0; i < (options.hugeHeaders ?? 0); i++) {
    keepAliveClient('/healthz', `X-Padding: ${'y'.repeat(64 * 1024)}\r\n`, 'oversized headers');
  }
  for (let i = 0; i < (options.slowloris ?? 0); i++) slowlorisClient();
  for (let i = 0; i < (options.silent ?? 0); i++) silentClient();
  setTimeout(() => {
    stopping = true;
    for (const socket of sockets) socket.destroy();
    figures.elapsedMs = Math.round(performance.now() - startedAt);
    for (const [label, stats] of Object.entries(figures.paths)) {
      stats.slowestMs = Math.round(stats.slowestMs);
      const sorted = (times.get(label) ?? []).sort((a, b) => a - b);
      stats.p99Ms = Math.round(sorted[Math.min(sorted.length - 1, Math.floor(0.99 * sorted.length))] ?? 0);
    }
    process.stdout.write(`${JSON.stringify(figures)}\n`, () => process.exit(0));
  }, options.durationMs);
}

setTimeout(() => process.exit(3), options.durationMs + 60_000).unref();
createInterface({ input: process.stdin }).once('line', () => {
  setTimeout(() => process.exit(2), options.durationMs + 5_000).unref();
  flood();
});
process.stdout.write('ready\n');
