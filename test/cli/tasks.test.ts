// `df-worker tasks sync`: the plan computed from the service's tasks and the handlers, and the command as a
// real process against the emulator: dry run, real sync, unmanaged tasks, failed requests, 429 retries, and the
// state lock it shares with the daemon.
import { once } from 'node:events';
import { readFile, stat } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { hostname } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ServiceClient } from '../../src/api/client.ts';
import type { Task } from '../../src/api/types.ts';
import { describeEntry, planTaskSync, taskDifferences } from '../../src/cli/shared/task-sync-plan.ts';
import { Emulator } from '../../src/emulator/index.ts';
import { defineTask, type TaskModule } from '../../src/handlers/define-task.ts';
import { StateFolderLockedError, StateLock } from '../../src/journal/state-lock.ts';
import { cli, tempDir } from './run-cli.ts';

const API_KEY = 'cli-sync-key-0123456789';

function serviceTask(key: string, overrides: Partial<Task> = {}): Task {
  return {
    object: 'task',
    id: `id-${key}`,
    createdAt: '2026-01-01T00:00:00Z',
    key,
    description: '',
    retryCount: 0,
    inputKeys: [],
    outputKeys: [],
    ...overrides,
  };
}

function handlers(...modules: TaskModule[]): Map<string, TaskModule> {
  return new Map(modules.map((m) => [m.key, m]));
}

const handle = () => ({});

describe('planTaskSync', () => {
  it('creates missing tasks, updates changed ones, keeps equal ones and lists the unmanaged, by key', () => {
    const plan = planTaskSync(
      [
        serviceTask('csv-to-records', { outputKeys: [{ key: 'records', description: '' }] }),
        serviceTask('notify-webhook', { inputKeys: [{ key: 'url', description: 'where' }] }),
        serviceTask('other-key'),
      ],
      handlers(
        defineTask({ key: 'notify-webhook', inputKeys: [{ key: 'url', description: 'where' }], handle }),
        defineTask({ key: 'enrich-product', retryCount: 1, handle }),
        defineTask({ key: 'csv-to-records', retryCount: 2, outputKeys: ['records', 'columns'], handle }),
      ),
    );
    expect(plan.entries.map(describeEntry)).toEqual([
      '~ update csv-to-records: retryCount 0 -> 2, outputKeys +columns',
      '+ create enrich-product',
      '= notify-webhook unchanged',
    ]);
    expect(plan.unmanaged).toEqual(['other-key']);
    expect(plan.entries[0]).toMatchObject({
      action: 'update',
      taskId: 'id-csv-to-records',
      definition: { key: 'csv-to-records', retryCount: 2 },
    });
    expect(plan.entries[1]).toMatchObject({
      action: 'create',
      definition: { key: 'enrich-product', description: '', retryCount: 1, inputKeys: [], outputKeys: [] },
    });
  });

  it("shows the handler's concurrency beside the task's concurrentExecLimit when either is set", () => {
    const plan = planTaskSync(
      [
        serviceTask('limited', { extraFields: { concurrentExecLimit: 2 } }),
        serviceTask('both', { extraFields: { concurrentExecLimit: 2 } }),
        serviceTask('neither'),
      ],
      handlers(
        defineTask({ key: 'limited', handle }),
        defineTask({ key: 'both', concurrency: 4, handle }),
        defineTask({ key: 'neither', handle }),
        defineTask({ key: 'declared', concurrency: 3, handle }),
      ),
    );
    expect(plan.entries.map(describeEntry)).toEqual([
      '= both unchanged\n    kept as on the service: concurrentExecLimit=2\n' +
        '    at once: handler concurrency 4, concurrentExecLimit 2 (slots above it stay idle)',
      '+ create declared\n    at once: handler concurrency 3, concurrentExecLimit not set',
      '= limited unchanged\n    kept as on the service: concurrentExecLimit=2\n' +
        '    at once: handler concurrency not set, concurrentExecLimit 2',
      '= neither unchanged',
    ]);
    // Shown, never synced: the create sends no concurrentExecLimit, the update none of its own.
    expect(plan.entries[1]).toMatchObject({
      action: 'create',
      concurrency: { handler: 3, service: undefined },
    });
    expect(plan.entries[1]!.action === 'create' && plan.entries[1]!.definition).not.toHaveProperty(
      'extraFields',
    );
  });

  it('names every kind of difference: description, removed, added, redescribed and reordered keys', () => {
    const key = (name: string, description = '') => ({ key: name, description });
    const definition = {
      key: 't',
      description: 'New text',
      retryCount: 0,
      inputKeys: [key('b'), key('a')],
      outputKeys: [key('x', 'now described'), key('z')],
    };
    const task = { ...definition, description: 'Old text', inputKeys: [key('a'), key('b')] };
    expect(taskDifferences({ ...task, outputKeys: [key('x'), key('y')] }, definition)).toEqual([
      'description "Old text" -> "New text"',
      'inputKeys reordered',
      'outputKeys +z -y ~x',
    ]);
    expect(taskDifferences(definition, definition)).toEqual([]);
    expect(taskDifferences({ ...definition, description: 'x'.repeat(100) }, definition)[0]).toBe(
      `description "${'x'.repeat(39)}…" -> "New text"`,
    );
  });
});

describe('df-worker tasks sync against the emulator', () => {
  let emulator: Emulator;
  let env: Record<string, string>;
  let stateDir: string;

  beforeEach(async () => {
    // Room for several runs in one second: each CLI process starts with its own per-second window.
    emulator = new Emulator({ apiKeys: [API_KEY], limits: { perSecond: 100, perMinute: 1000 } });
    await emulator.listen(0);
    emulator.createTask({ key: 'changed', retryCount: 0, inputKeys: [{ key: 'a', description: '' }] });
    emulator.createTask({ key: 'same', description: 'Stays', retryCount: 1 });
    emulator.createTask({ key: 'other-key', description: 'Not ours', retryCount: 5 });
    const handlersDir = await tempDir({
      'fresh.mjs': `export default { key: 'fresh', description: 'New', inputKeys: ['in'], outputKeys: ['out'], handle: () => ({ out: 1 }) };\n`,
      'changed.mjs': `export default { key: 'changed', retryCount: 2, inputKeys: ['a'], outputKeys: ['columns'], handle: () => ({ columns: [] }) };\n`,
      'same.mjs': `export default { key: 'same', description: 'Stays', retryCount: 1, handle: () => ({}) };\n`,
    });
    stateDir = path.join(await tempDir(), 'state');
    env = {
      DF_API_URL: emulator.url,
      DF_API_KEY: API_KEY,
      DF_STATE_DIR: stateDir,
      DF_HANDLERS_DIR: handlersDir,
    };
  });

  afterEach(async () => {
    await emulator.close();
  });

  async function serviceTasks(): Promise<Map<string, Task>> {
    const client = new ServiceClient({ baseUrl: emulator.url, apiKey: API_KEY });
    try {
      return new Map((await client.listTasks()).map((t) => [t.key, t]));
    } finally {
      await client.close();
    }
  }

  it('shows the plan on a dry run and sends nothing but the task list', async () => {
    const before = await serviceTasks();
    const requestsBefore = emulator.requests().length;
    const result = await cli(['tasks', 'sync', '--dry-run'], env);
    expect(result.code).toBe(0);
    expect(result.stdout.split('\n')).toEqual([
      `tasks on ${emulator.url} compared with the handlers in ${env.DF_HANDLERS_DIR}:`,
      '~ update changed: retryCount 0 -> 2, outputKeys +columns',
      '+ create fresh',
      '= same unchanged',
      '  (not managed here) other-key',
      'dry run: 1 to create, 1 to update; nothing was changed',
      '',
    ]);
    const sent = emulator.requests().slice(requestsBefore);
    expect(sent.map((r) => r.operation)).toEqual(['tasks.list']);
    expect(await serviceTasks()).toEqual(before);
  });

  it('creates the missing task, updates the changed one, leaves the others, and counts the requests', async () => {
    const before = await serviceTasks();
    const requestsBefore = emulator.requests().length;
    const result = await cli(['tasks', 'sync'], env);
    const sentByCli = emulator.requests().length - requestsBefore;
    expect(result).toMatchObject({ code: 0, stderr: '' });
    expect(result.stdout).toMatch(/^\[1\/2\] updated changed$/m);
    expect(result.stdout).toMatch(/^\[2\/2\] created fresh \(id .+\)$/m);
    expect(result.stdout).toContain('done: 1 created, 1 updated\n');

    const after = await serviceTasks();
    expect(after.get('fresh')).toMatchObject({
      description: 'New',
      retryCount: 0,
      inputKeys: [{ key: 'in', description: '' }],
      outputKeys: [{ key: 'out', description: '' }],
    });
    expect(after.get('changed')).toMatchObject({
      id: before.get('changed')!.id,
      retryCount: 2,
      outputKeys: [{ key: 'columns', description: '' }],
    });
    expect(after.get('same')).toEqual(before.get('same'));
    expect(after.get('other-key')).toEqual(before.get('other-key'));

    expect(sentByCli).toBe(3);
    const budget = JSON.parse(await readFile(path.join(stateDir, 'budget.json'), 'utf8')) as { used: number };
    expect(budget.used).toBe(sentByCli);
  });

  it('tries every change when one fails, exits 1, and retries a 429 after its Retry-After', async () => {
    emulator.setFaults([
      { operation: 'tasks.list', kind: 'rateLimit', retryAfterSeconds: 0, count: 1 },
      { operation: 'tasks.update', kind: 'status', status: 500, count: 1 },
    ]);
    const result = await cli(['tasks', 'sync'], env);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('the service answered 429 RATE_LIMIT; retrying in 0 s');
    expect(result.stdout).toMatch(/^\[1\/2\] failed to update changed: tasks.update answered 500/m);
    expect(result.stdout).toMatch(/^\[2\/2\] created fresh/m);
    expect(result.stdout).toContain('1 of 2 changes made, 1 failed; run it again to retry\n');
    expect((await serviceTasks()).has('fresh')).toBe(true);
  });

  it('refuses to run, dry run included, while another worker holds the state lock, and sends nothing', async () => {
    const lock = await StateLock.acquire(stateDir);
    const requestsBefore = emulator.requests().length;
    try {
      for (const args of [
        ['tasks', 'sync'],
        ['tasks', 'sync', '--dry-run'],
      ]) {
        const result = await cli(args, env);
        expect(result).toMatchObject({ code: 1, stdout: '' });
        expect(result.stderr).toContain(`another df-worker (pid ${process.pid} on ${hostname()}, heartbeat`);
        expect(result.stderr).toContain(`uses the state folder ${stateDir}`);
        expect(result.stderr).toContain('nothing was sent. Stop that worker and run the sync again');
        expect(result.stderr).toContain('restart the daemon with DF_TASK_SYNC=true');
      }
      expect(emulator.requests().length).toBe(requestsBefore);
      await expect(stat(path.join(stateDir, 'budget.json'))).rejects.toMatchObject({ code: 'ENOENT' });
      expect(JSON.parse(await readFile(lock.file, 'utf8'))).toMatchObject({ pid: process.pid });
    } finally {
      await lock.release();
    }

    const result = await cli(['tasks', 'sync'], env);
    expect(result).toMatchObject({ code: 0, stderr: '' });
    expect(result.stdout).toContain('done: 1 created, 1 updated\n');
    await expect(stat(lock.file)).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('holds the state lock while it talks to the service and releases it when a request fails', async () => {
    // A stand-in service that, on the task list, checks from outside that the CLI holds the lock, then fails.
    let lockAttempt: unknown;
    const service = createServer((request, response) => {
      void StateLock.acquire(stateDir)
        .then(
          async (lock) => {
            lockAttempt = lock;
            await lock.release();
          },
          (error: unknown) => (lockAttempt = error),
        )
        .then(() => {
          response.writeHead(500, { 'content-type': 'application/json' });
          response.end(JSON.stringify({ status: 500, code: 'INTERNAL', message: 'stand-in failure' }));
        });
    });
    service.listen(0, '127.0.0.1');
    await once(service, 'listening');
    try {
      const { port } = service.address() as AddressInfo;
      const result = await cli(['tasks', 'sync'], { ...env, DF_API_URL: `http://127.0.0.1:${port}` });
      expect(result.code).toBe(1);
      expect(result.stderr).toContain("could not list the service's tasks");
      expect(lockAttempt).toBeInstanceOf(StateFolderLockedError);
      expect((lockAttempt as StateFolderLockedError).holder.pid).not.toBe(process.pid);
      await expect(stat(path.join(stateDir, 'df-worker.lock'))).rejects.toMatchObject({ code: 'ENOENT' });
    } finally {
      service.closeAllConnections();
      await new Promise((resolve) => service.close(resolve));
    }
  });

  it('prints its help', async () => {
    const result = await cli(['tasks', 'sync', '--help'], {});
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^Usage: df-worker tasks sync \[--dry-run\]/);
    expect(result.stdout).toContain('(not managed here)');
    expect(result.stdout).toContain("takes the state folder's lock");
  });
});
