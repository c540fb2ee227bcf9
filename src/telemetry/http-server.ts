// The worker's own HTTP endpoints: /metrics for Prometheus, /healthz (alive, event loop not stuck),
// /readyz (can do its job), and POST /wake to poll now. Node's own http: four routes need no framework.
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { EventLoopLagMonitor } from './event-loop-lag.ts';

// process.getBuiltinModule rather than ESM imports: an import's namespace reads every export, and node:http's
// lazy WebSocket, CloseEvent and MessageEvent load node's own undici (5 MB more resident memory, measured in a
// bare node), node:crypto's webcrypto about 1 MB. The daemon, idle: 79.6 MB where 81.3 MB with the imports.
const { createServer } = process.getBuiltinModule('node:http');
const { createHash, timingSafeEqual } = process.getBuiltinModule('node:crypto');

export interface ProbeSource {
  readiness(): {
    ready: boolean;
    checks: Record<string, { ok: boolean; reason?: string }>;
    /** Shown in /readyz as information; readiness depends on the checks alone. */
    tasks?: { served: string[]; withoutTask: string[] };
  };
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
  /**
   * After such a stall, /healthz fails every probe until the loop has run this long without another, in ms.
   * Default: maxEventLoopDelayMs.
   */
  eventLoopRecoveryMs?: number;
  logger: Logger;
}

export class WorkerHttpServer {
  readonly #source: ProbeSource;
  readonly #o: HttpServerOptions;
  readonly #server: Server;
  readonly #loop: EventLoopLagMonitor;
  readonly #lagLimitMs: number;

  constructor(source: ProbeSource, options: HttpServerOptions) {
    this.#source = source;
    this.#o = options;
    this.#lagLimitMs = options.maxEventLoopDelayMs ?? 10_000;
    this.#loop = new EventLoopLagMonitor({
      limitMs: this.#lagLimitMs,
      recoveryMs: options.eventLoopRecoveryMs ?? this.#lagLimitMs,
    });
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
    this.#loop.stop();
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://localhost');
    if (req.method === 'GET' && url.pathname === '/healthz') return this.#healthz(res);
    if (req.method === 'GET' && url.pathname === '/readyz') {
      const r = this.#source.readiness();
      return send(res, r.ready ? 200 : 503, {
        status: r.ready ? 'ready' : 'not ready',
        checks: r.checks,
        ...(r.tasks ? { tasks: r.tasks } : {}),
      });
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
    if (url.pathname === '/wake') {
      return send(res, 404, {
        error:
          'POST /wake is off (DF_HTTP_WAKE=off): to enable it set DF_HTTP_WAKE=token and DF_HTTP_WAKE_TOKEN=<secret> ' +
          '(then send Authorization: Bearer <secret>), or DF_HTTP_WAKE=open on a trusted network',
      });
    }
    send(res, 404, { error: 'not found; try /healthz, /readyz or /metrics' });
  }

  #healthz(res: ServerResponse): void {
    const loop = this.#loop.health();
    const lagMs = Math.round(loop.lagMs);
    if (loop.stalled) {
      send(res, 503, {
        status: 'unhealthy',
        reason: `event loop blocked for ${lagMs} ms`,
        eventLoopLagMs: lagMs,
        limitMs: this.#lagLimitMs,
        healthyAfterMs: Math.ceil(loop.recoveryLeftMs),
      });
      return;
    }
    send(res, 200, { status: 'ok', eventLoopLagMs: lagMs });
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
