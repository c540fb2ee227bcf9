// ctx.service where the handler runs: in process and in a real worker thread (and a child process), against
// the loopback emulator. The same handler module, the same typed errors, and never the API key.
import { readFile } from 'node:fs/promises';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ServiceClient } from '../../src/api/client.ts';
import type { JsonObject } from '../../src/api/types.ts';
import { systemClock } from '../../src/clock/clock.ts';
import { Emulator } from '../../src/emulator/index.ts';
import { defineTask, type TaskModule } from '../../src/handlers/define-task.ts';
import { runExecution, type ExecutionOutcome } from '../../src/runner/run-execution.ts';
import { HandlerPool } from '../../src/sandbox/handler-pool.ts';
import { execution, recordingLogger } from '../runner/helpers.ts';

const KEY = 'svc-key-0123456789-secret';

/** `input.mode` picks what the handler does with ctx.service; `result` is JSON text of what it saw. */
const SERVICE_HANDLER = `
import { appendFileSync } from 'node:fs';
import { defineTask, PreconditionFailedError, ServiceError, ServiceCallRefusedError } from 'df-worker';

const describe = (e) => ({
  name: e.name,
  message: e.message,
  status: e.status,
  code: e.code,
  precondition: e instanceof PreconditionFailedError,
  serviceError: e instanceof ServiceError,
  refused: e instanceof ServiceCallRefusedError,
});

export default defineTask({
  key: 'uses-service',
  outputKeys: ['result'],
  handle: async (input, ctx) => {
    const s = ctx.service;
    switch (input.mode) {
      case 'every-operation': {
        const file = await s.files.upload({ name: 'out.csv', data: 'a,b\\n1,2\\n', contentType: 'text/csv' });
        const fileAgain = await s.files.get(file.id);
        const bytes = await s.files.upload({ name: 'raw.bin', data: new Uint8Array([1, 2, 3]) });
        const execution = await s.executions.get(String(input.executionId));
        const read = await s.variables.get(String(input.variableId));
        const updated = await s.variables.update(read.variable.id, { ...read.variable, value: 'next' }, { ifMatch: read.etag });
        const job = await s.jobExecutions.create({ jobId: 'job-1' });
        const jobAgain = await s.jobExecutions.get(job.id);
        let missing;
        try { await s.files.get('no-such-file'); } catch (e) { missing = describe(e); }
        let badArgument;
        try { await s.variables.update('', {}); } catch (e) { badArgument = describe(e); }
        return { result: JSON.stringify({ file, fileAgain, bytes, execution, read, updated, job, jobAgain, missing, badArgument,
          env: process.env, ctxKeys: Object.keys(ctx) }) };
      }
      case 'stale-etag': {
        const read = await s.variables.get(String(input.variableId));
        await s.variables.update(read.variable.id, { ...read.variable, value: 'first' }, { ifMatch: read.etag });
        try {
          await s.variables.update(read.variable.id, { ...read.variable, value: 'second' }, { ifMatch: read.etag });
          return { result: 'no error' };
        } catch (e) {
          return { result: JSON.stringify(describe(e)) };
        }
      }
      case 'after-end':
        setTimeout(() => s.files.get('x').catch((e) => appendFileSync(String(input.file), JSON.stringify(describe(e)))), 50);
        return { result: 'returned' };
      case 'after-abort':
        return await new Promise((_resolve, reject) => ctx.signal.addEventListener('abort', () => {
          s.files.get('x').catch((e) => appendFileSync(String(input.file), JSON.stringify(describe(e))));
          reject(ctx.signal.reason);
        }));
    }
    throw new Error('unknown mode');
  },
});
`;

let dir: string;
let emulator: Emulator;
let client: ServiceClient;
let file: string;

beforeAll(async () => {
  // Inside the package, so that an in-process import resolves `df-worker` to this source, as a project's would.
  dir = await mkdtemp(path.join(import.meta.dirname, '.tmp-ctx-service-'));
  file = path.join(dir, 'uses-service.ts');
  await writeFile(file, SERVICE_HANDLER);
  emulator = new Emulator({ apiKeys: [KEY], limits: { perSecond: 0, perMinute: 0, perMonth: 0 } });
  await emulator.listen();
  client = new ServiceClient({ baseUrl: emulator.url, apiKey: KEY });
});
afterAll(async () => {
  await client.close();
  await emulator.close();
  await rm(dir, { recursive: true, force: true });
});

interface Host {
  name: string;
  handler(): Promise<TaskModule & { file?: string }>;
  pool: HandlerPool | undefined;
}

/** The module imported into this process, as with DF_HANDLER_ISOLATION=none. */
async function importedHandler(): Promise<TaskModule> {
  const module = (await import(file)) as { default: TaskModule };
  return module.default;
}

const hosts: Array<{ name: 'in-process' | 'thread' | 'process' }> = [
  { name: 'in-process' },
  { name: 'thread' },
  { name: 'process' },
];

describe.each(hosts)('ctx.service ($name)', ({ name }) => {
  const host: Host = { name, pool: undefined, handler: async () => importedHandler() };
  beforeAll(() => {
    if (name === 'in-process') return;
    host.pool = new HandlerPool({
      isolation: name,
      memoryMb: 128,
      env: { PATH: process.env.PATH ?? '' },
      logger: recordingLogger().logger,
      redact: (text) => text,
      maxIdle: 1,
      abortSettleMs: 500,
    });
    const declared = defineTask({
      key: 'uses-service',
      outputKeys: ['result'],
      handle: () => ({ result: '' }),
    });
    host.handler = () => Promise.resolve({ ...declared, file });
  });
  afterAll(() => host.pool?.close());
  afterEach(() => emulator.reset());

  async function run(input: JsonObject, timeoutMs?: number): Promise<ExecutionOutcome> {
    const handler = await host.handler();
    return await runExecution({
      handler: timeoutMs === undefined ? handler : { ...handler, timeoutMs },
      task: { key: 'uses-service', retryCount: 0, inputKeys: [], outputKeys: handler.outputKeys },
      execution: execution(input, `exec-${name}`),
      clock: systemClock,
      logger: recordingLogger().logger,
      defaultTimeoutMs: 10_000,
      backoff: { baseMs: 0, maxMs: 0 },
      service: client,
      ...(host.pool ? { host: host.pool } : {}),
    });
  }

  it('performs every operation, with 404 as a ServiceError, and the key is nowhere the handler looks', async () => {
    emulator.createTask({ key: 'other' });
    const other = emulator.enqueueExecution('other', { sku: 'A' });
    const variable = emulator.createVariable({ key: 'cursor', value: 'v1' });
    const outcome = await run({ mode: 'every-operation', executionId: other.id, variableId: variable.id });
    expect(outcome.status, JSON.stringify(outcome.output)).toBe('COMPLETED');
    const seen = JSON.parse(String(outcome.output.result)) as Record<string, Record<string, unknown>>;
    expect(seen.file).toMatchObject({ name: 'out.csv', size: 8, contentType: 'text/csv' });
    expect(seen.fileAgain).toEqual(seen.file);
    expect(seen.bytes).toMatchObject({ name: 'raw.bin', size: 3, contentType: 'application/octet-stream' });
    expect(seen.execution).toMatchObject({ id: other.id, status: 'IN_PROGRESS' });
    expect(seen.read).toMatchObject({ etag: '"1"', variable: { id: variable.id, value: 'v1' } });
    expect(seen.updated).toMatchObject({ etag: '"2"', variable: { value: 'next' } });
    expect(seen.jobAgain).toEqual(seen.job);
    expect(seen.missing).toMatchObject({ name: 'ServiceError', status: 404, serviceError: true });
    expect(seen.badArgument).toMatchObject({ name: 'ServiceCallRefusedError', refused: true });
    expect(seen.ctxKeys).toContain('service');
    expect(emulator.variable(variable.id)?.value).toBe('next');
    expect(String(outcome.output.result)).not.toContain(KEY);
    if (name !== 'in-process') expect(JSON.stringify(seen.env)).not.toContain(KEY);
  });

  it('gives a stale ETag update a PreconditionFailedError the handler can instanceof', async () => {
    const variable = emulator.createVariable({ key: 'cursor', value: 'v1' });
    const outcome = await run({ mode: 'stale-etag', variableId: variable.id });
    const error = JSON.parse(String(outcome.output.result)) as Record<string, unknown>;
    expect(error).toMatchObject({
      name: 'PreconditionFailedError',
      status: 412,
      code: 'PRECONDITION_FAILED',
      precondition: true,
      serviceError: true,
    });
    console.log(`[${name}] stale ETag update: ${String(error.name)}: ${String(error.message)}`);
    expect(emulator.variable(variable.id)).toMatchObject({ value: 'first', etag: '"2"' });
  });

  it('refuses a call made after the attempt ended, and one made after ctx.signal aborted', async () => {
    const afterEnd = path.join(dir, `after-end-${name}`);
    expect((await run({ mode: 'after-end', file: afterEnd })).status).toBe('COMPLETED');
    const ended = JSON.parse(await eventually(afterEnd)) as Record<string, unknown>;
    expect(ended).toMatchObject({ name: 'ServiceCallRefusedError', refused: true });
    expect(ended.message).toMatch(/has ended; await every ctx\.service call/);

    const afterAbort = path.join(dir, `after-abort-${name}`);
    const outcome = await run({ mode: 'after-abort', file: afterAbort }, 200);
    expect(outcome.failure?.kind).toBe('timeout');
    const aborted = JSON.parse(await eventually(afterAbort)) as Record<string, unknown>;
    expect(aborted).toMatchObject({ name: 'ServiceCallRefusedError', refused: true });
    expect(aborted.message).toMatch(/was aborted/);
    expect(emulator.requests().filter((r) => r.operation === 'files.get')).toHaveLength(0);
  });
});

/** The file's text once the handler's late callback has written it. */
async function eventually(target: string): Promise<string> {
  for (let i = 0; i < 200; i++) {
    try {
      return await readFile(target, 'utf8');
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }
  throw new Error(`${target} was never written`);
}
