// The one guard every local server uses, over loopback with the headers a browser would send: the emulator
// (service routes, /__admin, console) and the daemon's port refuse a foreign Host, a cross-site request and a
// form body where JSON is expected; clients that are not browsers, and probes whatever their Host, pass.
import { request } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { Emulator } from '../../src/emulator/index.ts';
import { mountConsole } from '../../src/console/index.ts';
import { checkCrossSite, checkHost, checkJsonBody } from '../../src/security/request-guard.ts';
import { WorkerHttpServer, type HttpServerOptions } from '../../src/telemetry/http-server.ts';

const KEY = 'guard-key';
const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
});

interface Sent {
  status: number;
  body: string;
}

/** One request with exactly these headers (fetch would not let a test set Host). */
function send(
  url: string,
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: string,
): Promise<Sent> {
  return new Promise((resolve, reject) => {
    const req = request(`${url}${path}`, { method, headers }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

async function emulator(): Promise<{ emulator: Emulator; url: string }> {
  const emulator = new Emulator({ apiKeys: [KEY] });
  mountConsole(emulator, { mode: 'emulator' });
  const url = await emulator.listen();
  closers.push(() => emulator.close());
  emulator.createTask({ key: 'echo' });
  return { emulator, url };
}

async function daemonPort(
  options: Partial<HttpServerOptions> = {},
): Promise<{ url: string; woken: number[] }> {
  const woken: number[] = [];
  const server = new WorkerHttpServer(
    {
      readiness: () => ({ ready: true, checks: {} }),
      wake: () => woken.push(1),
      metrics: () => Promise.resolve('dfworker_ready 1\n'),
      metricsContentType: 'text/plain',
      statusPage: () => Promise.resolve({ body: '<p>status</p>', headers: { 'content-type': 'text/html' } }),
    },
    { port: 0, host: '127.0.0.1', wake: 'open', logger: pino({ level: 'silent' }), ...options },
  );
  closers.push(() => server.close());
  return { url: await server.listen(), woken };
}

const FORM = { 'content-type': 'application/x-www-form-urlencoded' };
const CROSS = { origin: 'http://127.0.0.1:1', 'sec-fetch-site': 'same-site' };

describe('the request guard', () => {
  it('takes loopback names and, where asked, IP literals; refuses other names and malformed Hosts', () => {
    for (const host of [
      '127.0.0.1:8080',
      'localhost',
      'LOCALHOST:1',
      'app.localhost:3',
      '[::1]:9',
      '127.9.9.9',
    ]) {
      expect(checkHost(host)).toBeUndefined();
    }
    expect(checkHost('10.0.0.5:9464')?.status).toBe(421);
    expect(checkHost('10.0.0.5:9464', { ipLiterals: true })).toBeUndefined();
    expect(checkHost('[fd00::1]:80', { ipLiterals: true })).toBeUndefined();
    expect(checkHost('rebind.attacker.example:8080', { ipLiterals: true })?.reason).toBe('foreign-host');
    expect(checkHost('ops.example.com:80', { names: ['ops.example.com'] })).toBeUndefined();
    expect(checkHost('127.0.0.1.attacker.example')?.status).toBe(421);
    expect(checkHost('a b')?.status).toBe(421);
  });

  it('refuses what a browser sends from another site; same-origin, navigation and non-browsers pass', () => {
    const host = '127.0.0.1:5000';
    expect(checkCrossSite('POST', { host, 'sec-fetch-site': 'cross-site' })?.status).toBe(403);
    expect(checkCrossSite('POST', { host, 'sec-fetch-site': 'same-site' })?.reason).toBe('cross-site');
    expect(checkCrossSite('POST', { host, origin: 'http://127.0.0.1:5001' })?.status).toBe(403);
    expect(checkCrossSite('POST', { host, origin: 'null' })?.status).toBe(403);
    expect(checkCrossSite('GET', { host, 'sec-fetch-site': 'cross-site' })).toBeUndefined();
    expect(
      checkCrossSite('GET', { host, 'sec-fetch-site': 'cross-site' }, { allMethods: true })?.status,
    ).toBe(403);
    expect(
      checkCrossSite('POST', { host, 'sec-fetch-site': 'same-origin', origin: `http://${host}` }),
    ).toBeUndefined();
    expect(checkCrossSite('POST', { host, 'sec-fetch-site': 'none' })).toBeUndefined();
    expect(checkCrossSite('POST', { host, origin: `http://${host}` })).toBeUndefined();
    expect(checkCrossSite('POST', { host })).toBeUndefined();
  });

  it('takes JSON (and +json) bodies, refuses the three types a form sends, lets an empty body pass', () => {
    expect(checkJsonBody('application/json; charset=utf-8', 2)).toBeUndefined();
    expect(checkJsonBody('application/merge-patch+json', 2)).toBeUndefined();
    for (const type of [
      'application/x-www-form-urlencoded',
      'multipart/form-data; boundary=x',
      'text/plain',
    ]) {
      expect(checkJsonBody(type, 2)?.status).toBe(415);
    }
    expect(checkJsonBody(undefined, 2)?.reason).toBe('not-json');
    expect(checkJsonBody('text/plain', 0)).toBeUndefined();
  });
});

describe('the emulator behind the guard', () => {
  it('refuses a foreign Host on the service routes, /__admin and the console; loopback names answer', async () => {
    const { url } = await emulator();
    const foreign = { host: 'rebind.attacker.example:80', 'x-api-key': KEY };
    for (const path of ['/v1/data-factory/tasks', '/__admin/tasks', '/console']) {
      const refused = await send(url, 'GET', path, foreign);
      expect(refused.status, path).toBe(421);
      expect(JSON.parse(refused.body)).toMatchObject({ code: 'DFW_HTTP_REFUSED', reason: 'foreign-host' });
      expect((await send(url, 'GET', path, { host: 'localhost', 'x-api-key': KEY })).status, path).toBe(200);
    }
  });

  it('answers a host name it was told to (a container service name), and no other', async () => {
    const e = new Emulator({ apiKeys: [KEY], allowedHosts: ['Emulator'] });
    const url = await e.listen();
    closers.push(() => e.close());
    const path = '/v1/data-factory/tasks';
    expect((await send(url, 'GET', path, { host: 'emulator:8080', 'x-api-key': KEY })).status).toBe(200);
    expect((await send(url, 'GET', path, { host: 'other:8080', 'x-api-key': KEY })).status).toBe(421);
  });

  it('refuses cross-site requests of every method, a poll included, and changes nothing', async () => {
    const { emulator: e, url } = await emulator();
    e.enqueueExecution('echo', { n: 1 });
    const poll = await send(
      url,
      'GET',
      `/v1/data-factory/tasks/${e.tasks()[0]!.id}/poll?api_key=${KEY}`,
      CROSS,
    );
    expect(poll.status).toBe(403);
    const enqueue = await send(
      url,
      'POST',
      '/__admin/executions',
      { ...CROSS, 'content-type': 'application/json' },
      '{"taskKey":"echo"}',
    );
    expect(enqueue.status).toBe(403);
    expect((await send(url, 'POST', '/__admin/reset', CROSS)).status).toBe(403);
    expect(e.executions()).toHaveLength(1);
    expect(e.executions()[0]!.claimedAt).toBeUndefined();
    expect(e.tasks()).toHaveLength(1);
  });

  it('refuses a form body on the JSON routes of the service and /__admin; JSON is taken', async () => {
    const { emulator: e, url } = await emulator();
    const variable = 'key=leak&value=1';
    const service = await send(url, 'POST', `/v1/data-factory/variables?api_key=${KEY}`, FORM, variable);
    expect(service.status).toBe(415);
    const admin = await send(
      url,
      'POST',
      '/__admin/executions',
      { 'content-type': 'text/plain' },
      '{"taskKey":"echo"}',
    );
    expect(admin.status).toBe(415);
    expect(e.variables()).toHaveLength(0);
    expect(e.executions()).toHaveLength(0);
    const json = { 'content-type': 'application/json' };
    expect((await send(url, 'POST', '/__admin/executions', json, '{"taskKey":"echo"}')).status).toBe(201);
  });
});

describe("the daemon's port behind the guard", () => {
  it('answers probes and /metrics whatever the Host; /status and /wake only its own names', async () => {
    const { url, woken } = await daemonPort({ statusHosts: ['ops.example.com'] });
    const kubelet = { host: 'df-worker.default.svc.cluster.local:9464' };
    for (const path of ['/healthz', '/readyz', '/metrics']) {
      expect((await send(url, 'GET', path, kubelet)).status, path).toBe(200);
    }
    expect((await send(url, 'GET', '/status', kubelet)).status).toBe(421);
    expect((await send(url, 'POST', '/wake', kubelet)).status).toBe(421);
    expect((await send(url, 'GET', '/status', { host: '10.1.2.3:9464' })).status).toBe(200);
    expect((await send(url, 'GET', '/status', { host: 'ops.example.com' })).status).toBe(200);
    expect(woken).toHaveLength(0);
  });

  it('takes a token-holding /wake under any Host (a CronJob calling the Service by name)', async () => {
    const { url, woken } = await daemonPort({ wake: 'token', wakeToken: 'wake-secret' });
    const byName = { host: 'df-worker.default.svc:9464' };
    expect(
      (await send(url, 'POST', '/wake', { ...byName, authorization: 'Bearer wake-secret' })).status,
    ).toBe(202);
    expect((await send(url, 'POST', '/wake', { ...byName, authorization: 'Bearer wrong' })).status).toBe(401);
    expect((await send(url, 'GET', '/status', byName)).status).toBe(421);
    expect(woken).toHaveLength(1);
  });

  it('refuses a cross-site POST /wake, and takes the same request from a client that is not a browser', async () => {
    const { url, woken } = await daemonPort();
    expect((await send(url, 'POST', '/wake', CROSS)).status).toBe(403);
    expect((await send(url, 'POST', '/wake', { 'sec-fetch-site': 'cross-site' })).status).toBe(403);
    expect(woken).toHaveLength(0);
    expect((await send(url, 'POST', '/wake', {})).status).toBe(202);
    expect(woken).toHaveLength(1);
  });

  it('answers loopback names only on every route in the dev session', async () => {
    const { url } = await daemonPort({ hosts: 'loopback' });
    for (const path of ['/healthz', '/metrics', '/status']) {
      expect((await send(url, 'GET', path, { host: '10.1.2.3' })).status, path).toBe(421);
      expect((await send(url, 'GET', path, { host: 'localhost' })).status, path).toBe(200);
    }
  });
});
