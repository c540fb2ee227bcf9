// The worker's own HTTP endpoints: /metrics for Prometheus, /healthz (alive, event loop not stuck),
// /readyz (can do its job), and POST /wake to poll now. Node's own http: four routes need no framework.
// It shares the daemon's event loop, so no client may cost it much: /metrics is rendered at most once per
// interval, connections are capped, and every wait on a client has a bound.
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Logger } from 'pino';
import { ConnectionCap, type ConnectionFigures } from './connection-cap.ts';
import { RequestPacer } from './request-pacer.ts';
import { EventLoopLagMonitor } from './event-loop-lag.ts';
import { MetricsRenderCache } from './metrics-cache.ts';
import { checkCrossSite, checkHost, type RequestRefusedError } from '../security/request-guard.ts';

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
  /** The read-only status page (DF_HTTP_STATUS_PAGE): its HTML and headers. Absent: GET /status answers 404. */
  statusPage?(): Promise<{ body: string; headers: Record<string, string> }>;
}

export interface HttpServerOptions {
  port: number;
  host: string;
  /** 'off': POST /wake answers 404; 'token': needs `Authorization: Bearer <wakeToken>`; 'open': anyone who reaches the port. */
  wake: 'off' | 'token' | 'open';
  wakeToken?: string;
  /**
   * Which Host names the server answers for. 'probes-any' (the daemon): /healthz, /readyz and /metrics answer
   * whatever Host a kubelet or Prometheus sends, and so does a /wake that needs its token; /status and an
   * open /wake only loopback names, IP literals and `statusHosts`. 'loopback' (df-worker dev): every route answers loopback names only. Default 'probes-any'.
   */
  hosts?: 'probes-any' | 'loopback';
  /** Names (lower case, no port) /status and /wake answer for besides loopback names and IP literals. */
  statusHosts?: readonly string[];
  /** /healthz fails when the event loop was blocked longer than this, in ms. Default 10 s. */
  maxEventLoopDelayMs?: number;
  /**
   * After such a stall, /healthz fails every probe until the loop has run this long without another, in ms.
   * Default: maxEventLoopDelayMs.
   */
  eventLoopRecoveryMs?: number;
  /** A rendering of /metrics is served to every scraper for this long, in ms. Default 1 s. */
  metricsRenderIntervalMs?: number;
  /**
   * The watch of the event loop another server of the process keeps (its `eventLoop`), so that both ports'
   * /healthz tell the same stall from one watch; this server then leaves stopping it to that one.
   */
  eventLoop?: EventLoopLagMonitor;
  /**
   * 'everything' (default): every route. 'probes': GET /healthz and /readyz only, the kubelet's own listener
   * (DF_HTTP_PROBE_PORT), whose accept queue no flood of the metrics port shares.
   */
  serves?: 'everything' | 'probes';
  /** Open connections at most; see connection-cap.ts for who gives way. Default 64. */
  maxConnections?: number;
  /** Requests answered per second at most; those over it wait their turn (request-pacer.ts). Default 1,000. */
  maxRequestsPerSecond?: number;
  /** Newcomers that wait for a place at most (connection-cap.ts). Default 1,024; tests shorten it. */
  lineLength?: number;
  /** Bounds on each client; default CLIENT_LIMITS (tests shorten them). */
  clientLimits?: Partial<ClientLimits>;
  logger: Logger;
}

export interface ClientLimits {
  /** From connecting (or the last answer) to the end of the request headers: slowloris is cut here. */
  headersTimeoutMs: number;
  /** From connecting to the whole request received. */
  requestTimeoutMs: number;
  /** An idle keep-alive connection is closed after this; a scraper reconnects for its next scrape. */
  keepAliveTimeoutMs: number;
  /** A socket with no byte in either direction for this long (a client that stops reading) is closed. */
  socketIdleMs: number;
  /** How often the two request timeouts are checked; Node's default (30 s) would let them overrun so long. */
  checkEveryMs: number;
}

/** What one client can hold, in ms: none is a setting, as probes and scrapers need far less. */
export const CLIENT_LIMITS: ClientLimits = {
  headersTimeoutMs: 5_000,
  requestTimeoutMs: 10_000,
  keepAliveTimeoutMs: 5_000,
  socketIdleMs: 10_000,
  checkEveryMs: 1_000,
};
/** Request headers larger than this are answered 431 and the connection closed; probes send a few hundred bytes. */
const MAX_HEADER_BYTES = 8 * 1024;
/** DF_HTTP_MAX_CONNECTIONS's default, for servers made without it. */
const DEFAULT_MAX_CONNECTIONS = 64;
const DEFAULT_MAX_REQUESTS_PER_SECOND = 1_000;
/** While the connection cap turns clients away, one warning a minute at most: a flood must not flood the log. */
const CAP_WARNING_EVERY_MS = 60_000;

export class WorkerHttpServer {
  readonly #source: ProbeSource;
  readonly #o: HttpServerOptions;
  readonly #server: Server;
  readonly #loop: EventLoopLagMonitor;
  readonly #lagLimitMs: number;
  readonly #metrics: MetricsRenderCache;
  readonly #connections: ConnectionCap;
  readonly #pacer: RequestPacer;
  #capWarned = { at: -Infinity, evicted: 0, refused: 0 };

  constructor(source: ProbeSource, options: HttpServerOptions) {
    this.#source = source;
    this.#o = options;
    this.#lagLimitMs = options.maxEventLoopDelayMs ?? 10_000;
    this.#loop =
      options.eventLoop ??
      new EventLoopLagMonitor({
        limitMs: this.#lagLimitMs,
        recoveryMs: options.eventLoopRecoveryMs ?? this.#lagLimitMs,
      });
    this.#metrics = new MetricsRenderCache(() => source.metrics(), {
      intervalMs: options.metricsRenderIntervalMs ?? 1_000,
    });
    const limits = { ...CLIENT_LIMITS, ...options.clientLimits };
    this.#connections = new ConnectionCap(options.maxConnections ?? DEFAULT_MAX_CONNECTIONS, {
      waitMs: limits.headersTimeoutMs,
      ...(options.lineLength === undefined ? {} : { lineLength: options.lineLength }),
    });
    this.#pacer = new RequestPacer({
      perSecond: options.maxRequestsPerSecond ?? DEFAULT_MAX_REQUESTS_PER_SECOND,
    });
    this.#server = createServer(
      {
        headersTimeout: limits.headersTimeoutMs,
        requestTimeout: limits.requestTimeoutMs,
        keepAliveTimeout: limits.keepAliveTimeoutMs,
        connectionsCheckingInterval: limits.checkEveryMs,
        maxHeaderSize: MAX_HEADER_BYTES,
      },
      (req, res) => {
        const socket = req.socket;
        this.#connections.requestStarted(socket);
        res.once('close', () => this.#connections.requestEnded(socket));
        const turn = this.#pacer.turn();
        const handled = turn
          ? turn.then(() => (res.destroyed ? undefined : this.#handle(req, res)))
          : this.#handle(req, res);
        handled.catch((error: unknown) => {
          options.logger.error({ err: error as Error }, 'health server request failed');
          if (!res.headersSent) send(res, 500, { error: 'internal error' });
        });
      },
    );
    this.#server.timeout = limits.socketIdleMs;
    this.#server.on('connection', (socket: Socket) => {
      this.#connections.admit(socket);
      this.#warnIfCapped();
    });
  }

  /** Open connections, and newcomers that took an idle one's place or were closed at once (DF_HTTP_MAX_CONNECTIONS). */
  connectionFigures(): ConnectionFigures {
    return this.#connections.figures();
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

  /** This server's watch of the event loop, for another server of the process to share. */
  get eventLoop(): EventLoopLagMonitor {
    return this.#loop;
  }

  async close(): Promise<void> {
    if (this.#o.eventLoop === undefined) this.#loop.stop();
    this.#connections.stop();
    this.#pacer.release();
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const refused = this.#refusal(req, url.pathname);
    if (refused) {
      req.resume();
      return send(res, refused.status, refused.toJSON());
    }
    if (req.method === 'GET' && url.pathname === '/healthz') return this.#healthz(res);
    const probesOnly = this.#o.serves === 'probes';
    if (probesOnly && !(req.method === 'GET' && url.pathname === '/readyz')) {
      return send(res, 404, {
        error:
          'the probe port (DF_HTTP_PROBE_PORT) answers GET /healthz and /readyz; the rest is on DF_HTTP_PORT',
      });
    }
    if (req.method === 'GET' && url.pathname === '/readyz') {
      const r = this.#source.readiness();
      return send(res, r.ready ? 200 : 503, {
        status: r.ready ? 'ready' : 'not ready',
        checks: r.checks,
        ...(r.tasks ? { tasks: r.tasks } : {}),
      });
    }
    if (req.method === 'GET' && url.pathname === '/metrics') {
      const body = await this.#metrics.body();
      res.writeHead(200, { 'content-type': this.#source.metricsContentType, 'content-length': body.length });
      res.end(body);
      return;
    }
    if (req.method === 'GET' && url.pathname === '/status') {
      if (!this.#source.statusPage) {
        return send(res, 404, { error: 'the status page is off: set DF_HTTP_STATUS_PAGE=true to serve it' });
      }
      const page = await this.#source.statusPage();
      res.writeHead(200, { ...page.headers, 'content-length': Buffer.byteLength(page.body) });
      res.end(page.body);
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

  /** A web page's request this port must not serve (see request-guard.ts); probes pass whatever their Host. */
  #refusal(req: IncomingMessage, pathname: string): RequestRefusedError | undefined {
    const probe = pathname === '/healthz' || pathname === '/readyz' || pathname === '/metrics';
    // A wake that needs its token cannot come from a rebinding page (it has no token): a CronJob may call it
    // by the Service's name. The status page and an open wake have nothing else standing in the way.
    const tokenWake = pathname === '/wake' && this.#o.wake === 'token';
    const hostChecked = this.#o.hosts === 'loopback' || !(probe || tokenWake);
    const host = hostChecked
      ? checkHost(req.headers.host, {
          ipLiterals: this.#o.hosts !== 'loopback',
          names: this.#o.statusHosts ?? [],
        })
      : undefined;
    return host ?? checkCrossSite(req.method ?? 'GET', req.headers);
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

  #warnIfCapped(): void {
    const { evicted, refused } = this.#connections.figures();
    const last = this.#capWarned;
    if (evicted === last.evicted && refused === last.refused) return;
    const now = performance.now();
    if (now - last.at < CAP_WARNING_EVERY_MS) return;
    this.#capWarned = { at: now, evicted, refused };
    this.#o.logger.warn(
      {
        maxConnections: this.#o.maxConnections ?? DEFAULT_MAX_CONNECTIONS,
        idleClosedForNewcomers: evicted - last.evicted,
        newcomersClosed: refused - last.refused,
      },
      'more clients on the HTTP port than DF_HTTP_MAX_CONNECTIONS: idle connections closed for newcomers, ' +
        'or newcomers closed at once (counts since the last such warning; at most one a minute)',
    );
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
  const text = `${JSON.stringify(body)}\n`;
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}
