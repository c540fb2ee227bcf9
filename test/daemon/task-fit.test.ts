// A handler's timeouts and concurrency against the limits its task carries on the service (a Conductor
// definition's fields): warned of by `check --online` and at start, never enforced.
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { Task } from '../../src/api/types.ts';
import { taskFitWarnings } from '../../src/daemon/task-fit.ts';
import { Emulator } from '../../src/emulator/index.ts';
import { cli, tempDir } from '../cli/run-cli.ts';
import { startHarness, type Harness } from './harness.ts';

function task(retryCount: number, extraFields: Task['extraFields']): Task {
  return {
    object: 'task',
    id: 't1',
    createdAt: '',
    key: 'export',
    description: '',
    retryCount,
    inputKeys: [],
    outputKeys: [],
    ...(extraFields ? { extraFields } : {}),
  };
}

describe('taskFitWarnings', () => {
  it('warns when every attempt run to its deadline can outlast responseTimeoutSeconds or timeoutSeconds', () => {
    const warnings = taskFitWarnings(
      task(2, { responseTimeoutSeconds: 600, timeoutSeconds: 3600 }),
      { timeoutMs: 300_000 },
      60_000,
    );
    // 3 attempts x 300 s = 900 s: past 600 s, within 3600 s.
    expect(warnings.map((w) => [w.field, w.serviceValue, w.handlerValue])).toEqual([
      ['responseTimeoutSeconds', 600, 900_000],
    ]);
    expect(warnings[0]!.message).toContain('3 attempts of 300000 ms');
  });

  it('compares DF_HANDLER_TIMEOUT_MS when the handler declares none, and nothing the task does not carry', () => {
    expect(taskFitWarnings(task(0, { timeoutSeconds: 60 }), {}, 300_000)[0]!.message).toContain(
      'DF_HANDLER_TIMEOUT_MS',
    );
    expect(taskFitWarnings(task(5, undefined), { timeoutMs: 10 ** 9, concurrency: 50 }, 1)).toEqual([]);
    expect(taskFitWarnings(task(0, { responseTimeoutSeconds: 60 }), { timeoutMs: 60_000 }, 1)).toEqual([]);
  });

  it('warns of a declared concurrency above concurrentExecLimit, and reads an absent one as none', () => {
    const limited = task(0, { concurrentExecLimit: 2 });
    expect(taskFitWarnings(limited, { timeoutMs: 1, concurrency: 4 }, 1).map((w) => w.field)).toEqual([
      'concurrentExecLimit',
    ]);
    expect(taskFitWarnings(limited, { timeoutMs: 1, concurrency: 2 }, 1)).toEqual([]);
    expect(taskFitWarnings(limited, { timeoutMs: 1, concurrency: 'many' }, 1)).toEqual([]);
    expect(taskFitWarnings(limited, { timeoutMs: 1 }, 1)).toEqual([]);
  });
});

describe('the warnings where a user sees them', () => {
  let harness: Harness | undefined;
  let emulator: Emulator | undefined;
  afterEach(async () => {
    await harness?.close();
    await emulator?.close();
    harness = undefined;
    emulator = undefined;
  });

  it('are logged at start, with the two figures', async () => {
    harness = await startHarness({
      handlers: [{ key: 'slow', timeoutMs: 120_000, handle: () => ({}) }],
      createTasks: false,
      start: false,
    });
    harness.emulator.createTask({ key: 'slow', responseTimeoutSeconds: 60 });
    await harness.worker.start();
    expect(harness.logs.find((line) => line.field === 'responseTimeoutSeconds')).toMatchObject({
      level: 40,
      taskKey: 'slow',
      serviceValue: 60,
      handlerValue: 120_000,
    });
  });

  it('are listed by check --online under the handler file', async () => {
    emulator = new Emulator({ apiKeys: ['fit-key'] });
    await emulator.listen();
    emulator.createTask({ key: 'slow', timeoutSeconds: 30 });
    const dir = await tempDir({
      'handlers/slow.mjs': `export default { key: 'slow', timeoutMs: 45000, handle: () => ({}) };\n`,
    });
    const result = await cli(['check', '--online'], {
      DF_API_URL: emulator.url,
      DF_API_KEY: 'fit-key',
      DF_HANDLERS_DIR: path.join(dir, 'handlers'),
      DF_STATE_DIR: path.join(dir, 'state'),
    });
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(
      /^ {2}warning: \S+slow\.mjs: task slow: one attempt of 45000 ms \(the handler's timeoutMs, retryCount 0\) can run past the service's timeoutSeconds of 30 s/m,
    );
  });
});
