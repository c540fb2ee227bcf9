// The worker's own HTTP endpoints: /metrics for Prometheus, /healthz (alive, event loop not stuck),
// /readyz (can do its job), and POST /wake to poll now. Node's own http: four routes need no framework.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createHash, timingSafeEqual } from 'node:crypto';
import type { Logger } from 'pino';

const TICK_MS = 100;

export interface ProbeSource {
  readiness(): { ready: boolean; checks: Record<string, { ok: boolean; reason?: string }> };
  wake(taskKey?: string): number;
  metrics(): Promise<string>;
  metricsContentType: string;
}

export interface HttpServerOptions {
  port: number;
  host: string;
  /** 'off': POST /wake answers 404; 'token': needs `Authorization: Bearer <wakeToken>`; 'open': anyone who reaches the port. */
  wake: 'off' | 'token' | 'open';
  wakeToken?: string;
  /** /healthz fails when the event loop was blocked longer than this, in ms. Default 10 s. */
  maxEventLoopDelayMs?: number;
  logger: Logger;
}

export class WorkerHttpServer {
  readonly #source: ProbeSource;
  readonly #o: HttpServerOptions;
  readonly #server: Server;
  #lastTick = Date.now();
  /** Longest lateness of the ticker since the last /healthz: how long the event loop was blocked. */
  #maxLagMs = 0;
  readonly #ticker: NodeJS.Timeout;

  constructor(source: ProbeSource, options: HttpServerOptions) {
    this.#source = source;
    this.#o = options;
    // A timer cannot fire while a handler blocks the loop: its lateness is the stall.
    this.#ticker = setInterval(() => {
      const now = Date.now();
      this.#maxLagMs = Math.max(this.#maxLagMs, now - this.#lastTick - TICK_MS);
      this.#lastTick = now;
    }, TICK_MS);
    this.#ticker.unref();
    this.#server = createServer((req, res) => {
      this.#handle(req, res).catch((error: unknown) => {
        options.logger.error({ err: error as Error }, 'health server request failed');
        if (!res.headersSent) send(res, 500, { error: 'internal error' });
      });
    });
    this.#server.requestTimeout = 10_000;
    this.#server.headersTimeout = 5_000;
  }

  async listen(): Promise<string> {
    await new Promise<void>((resolve, reject) => {
      this.#server.once('error', reject);
      this.#server.listen(this.#o.port, this.#o.host, () => {
        this.#server.off('error', reject);
        resolve();
      });
    });
    const address = this.#server.address();
    const port = typeof address === 'object' && address ? address.port : this.#o.port;
    return `http://${this.#o.host === '0.0.0.0' ? '127.0.0.1' : this.#o.host}:${port}`;
  }

  async close(): Promise<void> {
    clearInterval(this.#ticker);
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://localhost');
    if (req.method === 'GET' && url.pathname === '/healthz') return this.#healthz(res);
    if (req.method === 'GET' && url.pathname === '/readyz') {
      const r = this.#source.readiness();
      return send(res, r.ready ? 200 : 503, { status: r.ready ? 'ready' : 'not ready', checks: r.checks });
    }
    if (req.method === 'GET' && url.pathname === '/metrics') {
      const body = await this.#source.metrics();
      res.writeHead(200, { 'content-type': this.#source.metricsContentType });
      res.end(body);
      return;
    }
    if (url.pathname === '/wake' && this.#o.wake !== 'off') {
      if (req.method !== 'POST') return send(res, 405, { error: 'use POST /wake' });
      if (this.#o.wake === 'token' && !this.#tokenMatches(req.headers.authorization)) {
        return send(res, 401, { error: 'POST /wake needs Authorization: Bearer <DF_HTTP_WAKE_TOKEN>' });
      }
      const task = url.searchParams.get('task') ?? undefined;
      const woken = this.#source.wake(task);
      if (task !== undefined && woken === 0)
        return send(res, 404, { error: `no polled task has key "${task}"` });
      return send(res, 202, { woken });
    }
    send(res, 404, { error: 'not found; try /healthz, /readyz or /metrics' });
  }

  #healthz(res: ServerResponse): void {
    // The request itself may be the first thing to run after a stall, before the ticker caught up.
    const lagMs = Math.max(this.#maxLagMs, Date.now() - this.#lastTick - TICK_MS);
    this.#maxLagMs = 0;
    const limit = this.#o.maxEventLoopDelayMs ?? 10_000;
    if (lagMs > limit) {
      send(res, 503, {
        status: 'unhealthy',
        reason: `event loop blocked for ${Math.round(lagMs)} ms`,
        limitMs: limit,
      });
      return;
    }
    send(res, 200, { status: 'ok', eventLoopLagMs: Math.max(0, Math.round(lagMs)) });
  }

  #tokenMatches(header: string | undefined): boolean {
    const expected = this.#o.wakeToken ?? '';
    const given = header?.startsWith('Bearer ') ? header.slice(7) : '';
    if (expected === '') return false;
    // Digests are of equal length whatever was sent (non-ASCII included), and comparing them does not
    // tell the token's length through timing.
    return timingSafeEqual(digest(given), digest(expected));
  }
}

function digest(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}

function send(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(`${JSON.stringify(body)}\n`);
}
