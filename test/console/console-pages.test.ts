// The console's pages over loopback HTTP, on an emulator without a worker (df-worker emulator): what the
// service knows, user data escaped, the admin token on actions, loopback Host names only.
import { request } from 'node:http';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { mountConsole } from '../../src/console/index.ts';
import { NO_WORKER_NOTE } from '../../src/console/executions-view.ts';
import { ManualClock } from '../../src/clock/manual-clock.ts';
import { Emulator } from '../../src/emulator/index.ts';

let emulator: Emulator;

beforeEach(async () => {
  emulator = new Emulator({ adminToken: 'the-token' });
  mountConsole(emulator, { mode: 'emulator' });
  await emulator.listen(0);
});
afterEach(() => emulator.close());

/** A request with the Host header given (fetch does not let one set it). */
function get(path: string, headers: Record<string, string> = {}, method = 'GET') {
  return new Promise<{ status: number; headers: Record<string, unknown>; body: string }>(
    (resolve, reject) => {
      const req = request(`${emulator.url}${path}`, { method, headers }, (res) => {
        let body = '';
        res.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }));
      });
      req.on('error', reject);
      req.end();
    },
  );
}

async function fetchText(url: string): Promise<{ status: number; body: string }> {
  const answer = await fetch(url);
  return { status: answer.status, body: await answer.text() };
}

describe('the console pages', () => {
  it('shows what the service knows and says that attempts come from a worker', async () => {
    emulator.createTask({ key: 'greet', inputKeys: [{ key: 'name', description: '' }] });
    const execution = emulator.enqueueExecution('greet', { name: 'Ada' });
    const page = await get('/console');
    expect(page.status).toBe(200);
    expect(page.headers['content-security-policy']).toMatch(/script-src 'nonce-/);
    expect(page.body).toContain(`data-execution="${execution.id}"`);
    expect(page.body).toContain('not yet (pending)');
    expect(page.body).toContain(NO_WORKER_NOTE);
  });

  it("shows a task's fields beyond the description, as the service holds them", async () => {
    emulator.createTask({ key: 'greet', timeoutSeconds: 3600, concurrentExecLimit: 2 });
    const { body } = await get('/console');
    expect(body).toContain('<th>Other fields</th>');
    expect(body).toContain('timeoutSeconds=3600, concurrentExecLimit=2');
  });

  it('shows a claim the service timed out, styled apart, with the copy it queued again and a link between them', async () => {
    const clock = new ManualClock(Date.parse('2026-12-02T09:00:00Z'));
    const timed = new Emulator({ adminToken: 'the-token', clock, apiKeys: ['console-key'] });
    mountConsole(timed, { mode: 'emulator' });
    await timed.listen(0);
    try {
      const task = timed.createTask({ key: 'slow' });
      timed.setResponseTimeout('slow', { ms: 1_000 });
      const sameId = timed.createTask({ key: 'slow-same' });
      timed.setResponseTimeout('slow-same', { ms: 1_000, requeue: 'same-id' });
      const first = timed.enqueueExecution('slow', {});
      const again = timed.enqueueExecution('slow-same', {});
      for (const id of [task.id, sameId.id]) {
        const poll = await fetch(`${timed.url}/v1/data_factory/tasks/${id}/poll`, {
          headers: { 'x-api-key': 'console-key' },
        });
        expect(poll.status).toBe(200);
      }
      await clock.advance(1_500);
      const { body } = await fetchText(`${timed.url}/console`);
      const copy = timed.executions().find((e) => e.requeuedFrom === first.id)!;
      expect(body).toContain(`<span class="status status-TIMED_OUT">TIMED_OUT</span`);
      expect(body).toContain(`queued again as <a href="#x-${copy.id}">${copy.id}</a>`);
      expect(body).toContain(`<a href="#x-${first.id}">${first.id}</a> (it timed out)`);
      expect(body).toMatch(new RegExp(`data-execution="${again.id}"[\\s\\S]*?queued again under its id`));
      expect(body).toContain('.status-TIMED_OUT {');
    } finally {
      await timed.close();
    }
  });

  it('escapes user data: a <script> in an input is text', async () => {
    emulator.createTask({ key: 'greet' });
    emulator.enqueueExecution('greet', { name: '</pre><script>alert(1)</script>', "a'b": '"q"' });
    const { body } = await get('/console');
    expect(body).toContain('&lt;/pre&gt;&lt;script&gt;alert(1)&lt;/script&gt;');
    expect(body).not.toContain('<script>alert(1)');
    // The page's one script carries the nonce; no other script element is in it.
    expect(body.match(/<script/g)).toHaveLength(1);
  });

  it("shows each key's use of the limits, and the month's pace as an SVG chart", async () => {
    await fetch(`${emulator.url}/v1/data-factory/tasks`, { headers: { 'x-api-key': 'emulator-key' } });
    const { body } = await get('/console/budget');
    expect(body).toMatch(/data-window="this minute"[^]*?class="used">\s*1\s*</);
    expect(body).toContain('<svg');
    expect(body).toContain('class="even-pace"');
    expect(body).not.toContain('emulator-key');
  });

  it('refuses a dead-letter action without the admin token, as the admin routes do', async () => {
    const refused = await get('/console/dead-letters/execution-1/retry', {}, 'POST');
    expect(refused.status).toBe(401);
    const noWorker = await get(
      '/console/dead-letters/execution-1/retry',
      { authorization: 'Bearer the-token' },
      'POST',
    );
    expect(noWorker.status).toBe(404);
    expect(noWorker.body).toContain('No worker runs here');
  });

  it('answers only to a loopback Host name (no DNS rebinding)', async () => {
    expect((await get('/console', { host: 'attacker.example:80' })).status).toBe(421);
    expect((await get('/console', { host: 'localhost:1234' })).status).toBe(200);
  });
});
