// Issue 36, item 3, in real Chromium: a page of another origin (served from another loopback port) tries form
// posts and no-cors fetches at each route of the emulator (service routes with the key in the query,
// /__admin, the console) and at the daemon's POST /wake; a foreign Host (a name mapped to 127.0.0.1 by
// --host-resolver-rules, as DNS rebinding does) tries to read them. Each is refused and changes nothing; the
// same request from the console's (or the status page's) own origin is accepted.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Browser, Page } from 'playwright-core';
import { pino } from 'pino';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { mountConsole } from '../../src/console/index.ts';
import { Emulator } from '../../src/emulator/index.ts';
import { WorkerHttpServer } from '../../src/telemetry/http-server.ts';
import { launchChromium } from './console-session.ts';

/** A key a page could know (the fixed `emulator-key`/`dev-key` of 1a0690a): only the guard stands in the way. */
const KNOWN_KEY = 'emulator-key';
const REBIND_NAME = 'rebind.attacker.test';

let browser: Browser;
let page: Page;
let emulator: Emulator;
let emulatorUrl: string;
let daemon: WorkerHttpServer;
let daemonUrl: string;
let attacker: Server;
let attackerUrl: string;
let wakes = 0;
let taskId: string;

beforeAll(async () => {
  browser = await launchChromium([`--host-resolver-rules=MAP ${REBIND_NAME} 127.0.0.1`]);
  emulator = new Emulator({ apiKeys: [KNOWN_KEY] });
  mountConsole(emulator, { mode: 'emulator' });
  emulatorUrl = await emulator.listen();
  daemon = new WorkerHttpServer(
    {
      readiness: () => ({ ready: true, checks: {} }),
      wake: () => ++wakes,
      metrics: () => Promise.resolve('dfworker_ready 1\n'),
      metricsContentType: 'text/plain',
      statusPage: () =>
        Promise.resolve({ body: '<!doctype html><p>status</p>', headers: { 'content-type': 'text/html' } }),
    },
    { port: 0, host: '127.0.0.1', wake: 'open', logger: pino({ level: 'silent' }) },
  );
  daemonUrl = await daemon.listen();
  // The other origin: an empty page on another loopback port.
  attacker = createServer((_, res) => {
    res.writeHead(200, { 'content-type': 'text/html' });
    res.end('<!doctype html><title>another site</title>');
  });
  await new Promise<void>((resolve) => attacker.listen(0, '127.0.0.1', resolve));
  attackerUrl = `http://127.0.0.1:${(attacker.address() as AddressInfo).port}/`;
}, 45_000);

beforeEach(async () => {
  emulator.reset();
  taskId = emulator.createTask({ key: 'echo' }).id;
  emulator.enqueueExecution('echo', { n: 1 });
  wakes = 0;
  await page?.close();
  page = await browser.newPage();
});

afterAll(async () => {
  await browser?.close();
  await emulator?.close();
  await daemon?.close();
  await new Promise((resolve) => attacker?.close(resolve));
});

interface Attack {
  method: 'GET' | 'POST';
  url: string;
  /** The form's fields (a text/plain form can carry a JSON-looking body), and the fetch's body. */
  body?: string;
}

/**
 * Runs in the page of the other origin (plain JavaScript: the project's types have no DOM). A GET form replaces
 * the action's query with its fields, so the query goes in as fields; a text/plain POST form sends
 * `name=value`, so the name holds the JSON up to its last two characters and the value closes it.
 */
const ATTACK_SCRIPT = `async ({ method, url, body }) => {
  const frame = document.createElement('iframe');
  frame.name = 'sink';
  document.body.append(frame);
  const form = document.createElement('form');
  form.method = method;
  form.action = url;
  form.target = 'sink';
  if (method === 'GET') {
    for (const [name, value] of new URL(url).searchParams) {
      const field = document.createElement('input');
      field.type = 'hidden';
      field.name = name;
      field.value = value;
      form.append(field);
    }
  } else {
    form.enctype = 'text/plain';
    const text = body ?? '{}';
    const field = document.createElement('input');
    field.name = text.slice(0, -2);
    field.value = text.slice(-2);
    form.append(field);
  }
  document.body.append(form);
  const loaded = new Promise((resolve) => frame.addEventListener('load', resolve, { once: true }));
  form.submit();
  await loaded;
  await fetch(url, { method, mode: 'no-cors', ...(method === 'POST' ? { body: body ?? '{}' } : {}) });
}`;

/**
 * From the other origin: the request as an auto-submitted form into a hidden frame (text/plain, a JSON body
 * smuggled in one field), then as a `fetch` with mode no-cors. Resolves when both have been answered.
 */
async function fromAnotherOrigin(attack: Attack): Promise<number[]> {
  await page.goto(attackerUrl);
  // What the server answered each (the browser sees it, the page does not).
  const statuses: number[] = [];
  const onResponse = (response: { url(): string; status(): number }) => {
    // A GET form with no field leaves a bare `?`.
    if (response.url().replace(/\?$/, '') === attack.url) statuses.push(response.status());
  };
  page.on('response', onResponse);
  await page.evaluate(`(${ATTACK_SCRIPT})(${JSON.stringify(attack)})`);
  await expect.poll(() => statuses.length, { timeout: 5_000 }).toBe(2);
  page.off('response', onResponse);
  return statuses;
}

/** From the server's own origin (its console or status page): status of the same request. */
async function fromOwnPage(origin: string, path: string, attack: Omit<Attack, 'url'> & { path: string }) {
  await page.goto(`${origin}${path}`);
  return page.evaluate(async ({ method, path: target, body }) => {
    const answer = await fetch(target, {
      method,
      ...(method === 'POST' ? { body: body ?? '{}', headers: { 'content-type': 'application/json' } } : {}),
    });
    return answer.status;
  }, attack);
}

const poll = () => `${emulatorUrl}/v1/data-factory/tasks/${taskId}/poll?api_key=${KNOWN_KEY}`;

describe('a page of another origin, in Chromium', () => {
  it('cannot claim an execution through a poll (a GET), with the key in the query', async () => {
    expect(await fromAnotherOrigin({ method: 'GET', url: poll() })).toEqual([403, 403]);
    expect(emulator.executions()[0]!.claimedAt).toBeUndefined();
    expect(emulator.requests()).toHaveLength(0);
    const own = await fromOwnPage(emulatorUrl, '/console', {
      method: 'GET',
      path: `/v1/data-factory/tasks/${taskId}/poll?api_key=${KNOWN_KEY}`,
    });
    expect(own).toBe(200);
    expect(emulator.executions()[0]!.claimedAt).toBeDefined();
  });

  it('cannot create a variable through the service routes', async () => {
    const body = '{"key":"planted","name":"planted","value":"x","secret":false}';
    const refused = await fromAnotherOrigin({
      method: 'POST',
      url: `${emulatorUrl}/v1/data-factory/variables?api_key=${KNOWN_KEY}`,
      body,
    });
    expect(refused).toEqual([403, 403]);
    expect(emulator.variables()).toHaveLength(0);
    const own = await fromOwnPage(emulatorUrl, '/console', {
      method: 'POST',
      path: `/v1/data-factory/variables?api_key=${KNOWN_KEY}`,
      body,
    });
    expect(own).toBe(201);
    expect(emulator.variables().map((v) => v.key)).toEqual(['planted']);
  });

  it('cannot enqueue, create a variable or reset through /__admin', async () => {
    const attacks: Attack[] = [
      {
        method: 'POST',
        url: `${emulatorUrl}/__admin/executions`,
        body: '{"taskKey":"echo","input":{"n":2}}',
      },
      { method: 'POST', url: `${emulatorUrl}/__admin/variables`, body: '{"key":"planted","value":"x"}' },
      { method: 'POST', url: `${emulatorUrl}/__admin/reset` },
      { method: 'GET', url: `${emulatorUrl}/__admin/executions` },
    ];
    for (const attack of attacks) expect(await fromAnotherOrigin(attack), attack.url).toEqual([403, 403]);
    expect(emulator.executions()).toHaveLength(1);
    expect(emulator.variables()).toHaveLength(0);
    expect(emulator.tasks()).toHaveLength(1);
    const own = await fromOwnPage(emulatorUrl, '/console', {
      method: 'POST',
      path: '/__admin/executions',
      body: '{"taskKey":"echo","input":{"n":2}}',
    });
    expect(own).toBe(201);
    expect(emulator.executions()).toHaveLength(2);
  });

  it("cannot act on the console's dead letters", async () => {
    const url = `${emulatorUrl}/console/dead-letters/x/discard`;
    expect(await fromAnotherOrigin({ method: 'POST', url })).toEqual([403, 403]);
    expect(await fromAnotherOrigin({ method: 'GET', url: `${emulatorUrl}/console` })).toEqual([403, 403]);
    // From the console itself the request reaches the console (404: no worker runs here to keep dead letters).
    const own = await fromOwnPage(emulatorUrl, '/console', {
      method: 'POST',
      path: '/console/dead-letters/x/discard',
    });
    expect(own).toBe(404);
  });

  it("cannot wake the daemon through its port; the status page's own origin can", async () => {
    expect(await fromAnotherOrigin({ method: 'POST', url: `${daemonUrl}/wake` })).toEqual([403, 403]);
    expect(wakes).toBe(0);
    expect(await fromOwnPage(daemonUrl, '/status', { method: 'POST', path: '/wake' })).toBe(202);
    expect(wakes).toBe(1);
  });
});

describe('a foreign Host (a name resolved to 127.0.0.1), in Chromium', () => {
  const rebound = (url: string, path: string) => {
    const { port } = new URL(url);
    return `http://${REBIND_NAME}:${port}${path}`;
  };

  it('reads nothing of the emulator: service routes, /__admin, console', async () => {
    emulator.createVariable({ id: 'token', key: 'token', value: 'hunter2' });
    for (const path of [
      `/v1/data-factory/variables/token?api_key=${KNOWN_KEY}`,
      '/__admin/variables',
      '/console',
    ]) {
      const answer = await page.goto(rebound(emulatorUrl, path));
      expect(answer?.status(), path).toBe(421);
      expect(await page.content(), path).not.toContain('hunter2');
      // And a script of that origin (same-origin to itself, as after a rebinding) reads no more.
      const read = await page.evaluate(async (target) => {
        const r = await fetch(target);
        return { status: r.status, text: await r.text() };
      }, path);
      expect(read.status, path).toBe(421);
      expect(read.text, path).not.toContain('hunter2');
    }
    // The same routes on the emulator's own name answer.
    const own = await page.goto(`${emulatorUrl}/v1/data-factory/variables/token?api_key=${KNOWN_KEY}`);
    expect(own?.status()).toBe(200);
  });

  it("is refused on the daemon's /status and /wake, while /metrics and the probes answer any Host", async () => {
    expect((await page.goto(rebound(daemonUrl, '/status')))?.status()).toBe(421);
    const wake = await page.evaluate(async () => (await fetch('/wake', { method: 'POST' })).status);
    expect(wake).toBe(421);
    expect(wakes).toBe(0);
    for (const path of ['/metrics', '/healthz', '/readyz']) {
      expect((await page.goto(rebound(daemonUrl, path)))?.status(), path).toBe(200);
    }
  });
});
