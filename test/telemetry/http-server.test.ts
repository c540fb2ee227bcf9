// The worker's HTTP endpoints over loopback: probes, metrics, and the three modes of POST /wake.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { pino } from 'pino';
import { loadConfig } from '../../src/config/load.ts';
import { standaloneDaemon } from '../../src/standalone/standalone-mode.ts';
import {
  WorkerHttpServer,
  type HttpServerOptions,
  type ProbeSource,
} from '../../src/telemetry/http-server.ts';

let server: WorkerHttpServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

function source(ready = true) {
  const woken: (string | undefined)[] = [];
  const probe: ProbeSource = {
    readiness: () => ({
      ready,
      checks: {
        service: ready ? { ok: true } : { ok: false, reason: 'the service refuses the API key (401)' },
      },
    }),
    wake: (task) => {
      woken.push(task);
      return task === 'unknown' ? 0 : 1;
    },
    metrics: () => Promise.resolve('dfworker_ready 1\n'),
    metricsContentType: 'text/plain; version=0.0.4; charset=utf-8',
  };
  return { probe, woken };
}

async function start(probe: ProbeSource, options: Partial<HttpServerOptions> = {}): Promise<string> {
  server = new WorkerHttpServer(probe, {
    port: 0,
    host: '127.0.0.1',
    wake: 'off',
    logger: pino({ level: 'silent' }),
    ...options,
  });
  return server.listen();
}

/** Holds the event loop as a handler stuck in synchronous code does. */
function blockEventLoop(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // Busy: no timer and no request runs meanwhile.
  }
}

describe('worker HTTP server', () => {
  it('answers /readyz 503 with the reason of each failed check', async () => {
    const url = await start(source(false).probe);
    const res = await fetch(`${url}/readyz`);
    expect(res.status).toBe(503);
    expect(await res.json()).toEqual({
      status: 'not ready',
      checks: { service: { ok: false, reason: 'the service refuses the API key (401)' } },
    });
    expect((await fetch(`${url}/readyz`.replace('readyz', 'healthz'))).status).toBe(200);
  });

  it('serves the metrics in Prometheus text format', async () => {
    const url = await start(source().probe);
    const res = await fetch(`${url}/metrics`);
    expect(res.headers.get('content-type')).toMatch(/text\/plain/);
    expect(await res.text()).toBe('dfworker_ready 1\n');
  });

  it('fails /healthz after the event loop was blocked longer than the limit', async () => {
    const url = await start(source().probe, { maxEventLoopDelayMs: 150 });
    const until = Date.now() + 400;
    while (Date.now() < until) {
      // A handler stuck in a synchronous loop.
    }
    const res = await fetch(`${url}/healthz`);
    expect(res.status).toBe(503);
    expect(((await res.json()) as { reason: string }).reason).toMatch(/event loop blocked/);
  });

  it('fails /healthz for every probe after a stall, until the loop has run the recovery time without one', async () => {
    const url = await start(source().probe, { maxEventLoopDelayMs: 150, eventLoopRecoveryMs: 1_000 });
    blockEventLoop(400);
    const resumedAt = performance.now();
    // Several probers (kubelet, a Docker HEALTHCHECK, an operator's curl) one after another: all see it.
    const probes: Response[] = [];
    for (let probe = 0; probe < 3; probe++) probes.push(await fetch(`${url}/healthz`));
    expect(probes.map((res) => res.status)).toEqual([503, 503, 503]);
    for (const res of probes) {
      const body = (await res.json()) as { reason: string; eventLoopLagMs: number; limitMs: number };
      expect(body.reason).toMatch(/^event loop blocked for \d+ ms$/);
      expect(body.eventLoopLagMs).toBeGreaterThanOrEqual(250);
      expect(body.limitMs).toBe(150);
    }
    await vi.waitFor(
      async () => {
        expect((await fetch(`${url}/healthz`)).status).toBe(200);
      },
      { timeout: 5_000, interval: 50 },
    );
    expect(performance.now() - resumedAt).toBeGreaterThanOrEqual(1_000);
    for (let probe = 0; probe < 2; probe++) expect((await fetch(`${url}/healthz`)).status).toBe(200);
  });

  it('keeps POST /wake off by default', async () => {
    const { probe, woken } = source();
    const url = await start(probe);
    const off = await fetch(`${url}/wake`, { method: 'POST' });
    expect(off.status).toBe(404);
    expect(((await off.json()) as { error: string }).error).toMatch(/DF_HTTP_WAKE=token/);
    expect(woken).toEqual([]);
  });

  it('requires the bearer token in token mode and wakes one task or all', async () => {
    const { probe, woken } = source();
    const url = await start(probe, { wake: 'token', wakeToken: 's3cret-token' });
    expect((await fetch(`${url}/wake`, { method: 'POST' })).status).toBe(401);
    expect(
      (await fetch(`${url}/wake`, { method: 'POST', headers: { authorization: 'Bearer wrong-token!' } }))
        .status,
    ).toBe(401);
    // As many characters as the token, but more bytes (é is two in UTF-8): refused, not a 500.
    expect(
      (await fetch(`${url}/wake`, { method: 'POST', headers: { authorization: 'Bearer é3cret-token' } }))
        .status,
    ).toBe(401);
    const auth = { authorization: 'Bearer s3cret-token' };
    const one = await fetch(`${url}/wake?task=enrich`, { method: 'POST', headers: auth });
    expect(one.status).toBe(202);
    expect(await one.json()).toEqual({ woken: 1 });
    expect((await fetch(`${url}/wake?task=unknown`, { method: 'POST', headers: auth })).status).toBe(404);
    expect((await fetch(`${url}/wake`, { method: 'POST', headers: auth })).status).toBe(202);
    expect((await fetch(`${url}/wake`, { headers: auth })).status).toBe(405);
    expect(woken).toEqual(['enrich', 'unknown', undefined]);
  });

  it('answers only GET /healthz and /readyz on the probe port, even with POST /wake open', async () => {
    const { probe, woken } = source(false);
    let rendered = 0;
    const url = await start(
      {
        ...probe,
        metrics: () => {
          rendered++;
          return probe.metrics();
        },
        statusPage: () => Promise.resolve({ body: '<p>status</p>', headers: {} }),
      },
      { serves: 'probes', wake: 'open' },
    );
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    const ready = await fetch(`${url}/readyz`);
    expect(ready.status).toBe(503);
    expect(((await ready.json()) as { checks: object }).checks).toHaveProperty('service');
    for (const [method, path] of [
      ['GET', '/metrics'],
      ['GET', '/status'],
      ['POST', '/wake'],
      ['POST', '/healthz'],
      ['POST', '/readyz'],
    ] as const) {
      const res = await fetch(`${url}${path}`, { method });
      expect(res.status, `${method} ${path}`).toBe(404);
      expect(((await res.json()) as { error: string }).error).toMatch(/probe port .*DF_HTTP_PORT/);
    }
    expect(rendered).toBe(0);
    expect(woken).toEqual([]);
  });

  it('accepts anyone in open mode', async () => {
    const { probe, woken } = source();
    const url = await start(probe, { wake: 'open' });
    expect((await fetch(`${url}/wake?task=a`, { method: 'POST' })).status).toBe(202);
    expect(woken).toEqual(['a']);
  });
});

describe('metrics of a worker that has not started', () => {
  it('renders without the budget gauges instead of failing a scrape during start-up', async () => {
    const worker = standaloneDaemon({ config: loadConfig({ env: {} }), logger: pino({ level: 'silent' }) });
    const text = await worker.metrics.render();
    expect(text).toMatch(/dfworker_ready 0/);
    expect(text).not.toMatch(/dfworker_budget_limit_requests\{/);
  });
});
