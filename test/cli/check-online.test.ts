// `df-worker check --online`: one request to the service, reporting the URL, the key and the month's budget.
import { readFile, writeFile } from 'node:fs/promises';
import { createServer, type AddressInfo } from 'node:net';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { cliCommand } from '../../src/cli/invocation.ts';
import { Emulator } from '../../src/emulator/index.ts';
import { StateLock } from '../../src/journal/state-lock.ts';
import { cli, tempDir } from './run-cli.ts';

const KEY = 'check-online-key-2b7d';
let emulator: Emulator;
let dir: string;

beforeEach(async () => {
  emulator = new Emulator({ apiKeys: [KEY] });
  await emulator.listen();
  dir = await tempDir({ 'handlers/good.mjs': `export default { key: 'good', handle: () => ({}) };\n` });
});

afterEach(async () => {
  await emulator.close();
});

function env(extra: Record<string, string> = {}): Record<string, string> {
  return {
    DF_API_URL: emulator.url,
    DF_API_KEY: KEY,
    DF_HANDLERS_DIR: path.join(dir, 'handlers'),
    DF_STATE_DIR: path.join(dir, 'state'),
    ...extra,
  };
}

describe('df-worker check --online', () => {
  it('reports the URL reached, the key valid and the budget, counting its one request in the state folder', async () => {
    emulator.createTask({ key: 'good' });
    const result = await cli(['check', '--online'], env());
    expect(result).toMatchObject({ code: 0, stderr: '' });
    expect(result.stdout).toContain(
      `url: ${emulator.url} (the service answered; 1 task there)\nkey: valid\n` +
        'tasks: 1 of 1 handler has its task on the service\n' +
        'paths: underscore (/v1/data_factory/tasks; found by DF_API_PATH_STYLE=auto, tried underscore)\n',
    );
    expect(result.stdout).toMatch(
      /^budget: 1 of 40000 requests used in \d{4}-\d{2}, 39999 left until \S+ \(DF_BUDGET_PER_MONTH\); at most 5\/s and 50\/min$/m,
    );
    expect(emulator.requests().map((request) => request.operation)).toEqual(['tasks.list']);
    const saved = JSON.parse(await readFile(path.join(dir, 'state', 'budget.json'), 'utf8')) as {
      used: number;
    };
    expect(saved.used).toBe(1);
  });

  it('names a handler whose task is not on the service, with its file, the nearest task key and the fix; exit 1', async () => {
    const handlers = path.join(dir, 'handlers');
    await writeFile(
      path.join(handlers, 'mine.mjs'),
      `export default { key: 'my-tsak', handle: () => ({}) };\n`,
    );
    await writeFile(
      path.join(handlers, 'other.mjs'),
      `export default { key: 'report', handle: () => ({}) };\n`,
    );
    emulator.createTask({ key: 'good' });
    emulator.createTask({ key: 'my-task' });
    const result = await cli(['check', '--online'], env());
    expect(result.code).toBe(1);
    const sync = cliCommand('tasks sync');
    expect(result.stdout).toContain(
      `tasks: 1 of 3 handlers have their task on the service; 2 without (create them with \`${sync}\`)\n` +
        `  ${path.join(handlers, 'mine.mjs')}: no task on the service has the key "my-tsak"; did you mean ` +
        `my-task? (then correct the handler's key); create it with \`${sync}\`\n` +
        `  ${path.join(handlers, 'other.mjs')}: no task on the service has the key "report"; create it with \`${sync}\`\n`,
    );
    expect(result.stdout).toMatch(/^check failed: 2 problems/m);
    // The whole list in one request (up to 1,000 tasks a page), as before the task check.
    expect(emulator.requests().map((request) => request.operation)).toEqual(['tasks.list']);
  });

  it('says the key is invalid, without printing it, and exits 1', async () => {
    const result = await cli(['check', '--online'], env({ DF_API_KEY: 'not-the-key-9f' }));
    expect(result.code).toBe(1);
    expect(result.stdout).toMatch(/^key: invalid: tasks\.list answered 401 .*check DF_API_KEY/m);
    expect(result.stdout).not.toContain('not-the-key-9f');
  });

  it('names DF_API_URL when nothing listens at it', async () => {
    const port = await closedPort();
    const result = await cli(['check', '--online'], env({ DF_API_URL: `http://127.0.0.1:${port}` }));
    expect(result.code).toBe(1);
    expect(result.stdout).toContain(
      `url: http://127.0.0.1:${port}: tasks.list could not reach http://127.0.0.1:${port}: nothing accepts ` +
        `connections at 127.0.0.1:${port} (ECONNREFUSED); the request was not sent. Check the host and port in ` +
        'DF_API_URL, and that the service (or the emulator) runs there\nkey: unknown (no answer)\n',
    );
  });

  it('says the scheme is likely wrong for https to the (plain HTTP) emulator', async () => {
    const https = emulator.url.replace(/^http:/, 'https:');
    const result = await cli(['check', '--online'], env({ DF_API_URL: https }));
    expect(result.code).toBe(1);
    expect(result.stdout).toContain(
      `The scheme is likely wrong: DF_API_URL should start with http:// (${emulator.url})`,
    );
  });

  it('sends nothing beside a running worker, showing the budget that worker saved', async () => {
    const lock = await StateLock.acquire(path.join(dir, 'state'));
    try {
      const result = await cli(['check', '--online'], env());
      expect(result.code).toBe(0);
      expect(result.stdout).toMatch(/^url: .* \(not tried: another df-worker \(pid \d+/m);
      expect(result.stdout).toContain('key: not tried\n');
      expect(result.stdout).toMatch(
        /^budget: 0 of 40000 requests used in .* \(as the running worker last saved it\)$/m,
      );
      expect(emulator.requests()).toEqual([]);
    } finally {
      await lock.release();
    }
  });

  it('is a usage error without DF_API_URL', async () => {
    const result = await cli(['check', '--online'], { DF_HANDLERS_DIR: path.join(dir, 'handlers') });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('--online needs DF_API_URL and DF_API_KEY');
  });
});

/** A loopback port nothing listens on: bound, then closed. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}
