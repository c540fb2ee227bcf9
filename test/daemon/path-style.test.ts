// DF_API_PATH_STYLE=auto, the default: the daemon finds the spelling the service answers, on an emulator that
// serves only one, and refuses to start when neither spelling is a route there.
import { createServer, type Server } from 'node:http';
import { mkdtemp, rm } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { PathStyleError } from '../../src/api/path-style.ts';
import { loadConfig } from '../../src/config/load.ts';
import { standaloneDaemon } from '../../src/standalone/standalone-mode.ts';
import { defineTask } from '../../src/handlers/define-task.ts';
import { startHarness, waitFor, type Harness } from './harness.ts';

let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

describe.each([
  { served: 'underscore' as const, factory: '/v1/data_factory', executions: 'task_executions', misses: 0 },
  { served: 'hyphen' as const, factory: '/v1/data-factory', executions: 'task-executions', misses: 1 },
])('an emulator serving only the $served spelling', ({ served, factory, executions, misses }) => {
  it('is found with no setting: the default configuration claims and reports an execution there', async () => {
    harness = await startHarness({
      emulator: { pathStyle: served },
      handlers: [{ key: 'echo', inputKeys: ['n'], outputKeys: ['n'], handle: (input) => input }],
    });
    expect(harness.config.api.pathStyle).toBe('auto');
    const execution = harness.emulator.enqueueExecution('echo', { n: 7 });
    harness.worker.wake();
    await waitFor(() => harness!.emulator.execution(execution.id)?.status === 'COMPLETED', 'the report');
    expect(harness.emulator.execution(execution.id)!.output).toEqual({ n: 7 });

    const requests = harness.emulator.requests();
    // The first task list is the probe: underscore first, so hyphen costs one 404 and underscore none.
    const notFound = requests.filter((request) => request.status === 404 && request.operation === 'unknown');
    expect(notFound.map((request) => request.path)).toEqual(misses === 1 ? ['/v1/data_factory/tasks'] : []);
    const onRoutes = requests.filter((request) => request.operation !== 'unknown');
    expect(onRoutes.every((request) => request.path.startsWith(factory))).toBe(true);
    expect(requests.some((request) => request.path === `${factory}/${executions}/${execution.id}`)).toBe(
      true,
    );
    expect(
      harness.logs.find((line) => typeof line.msg === 'string' && line.msg.includes('spelling of its paths')),
    ).toMatchObject({ pathStyle: served });
  });
});

describe('a server answering every data-factory path with an HTML 404', () => {
  let server: Server | undefined;
  let stateDir: string | undefined;
  afterEach(async () => {
    await new Promise((resolve) => server?.close(resolve) ?? resolve(undefined));
    if (stateDir) await rm(stateDir, { recursive: true, force: true });
  });

  it('stops the start with DFW_API_PATH_STYLE_UNKNOWN naming DF_API_URL and DF_API_PATH_STYLE', async () => {
    const paths: string[] = [];
    server = createServer((request, response) => {
      paths.push(request.url ?? '');
      response.writeHead(404, { 'content-type': 'text/html' });
      response.end('<html><body><h1>404 Not Found</h1></body></html>');
    });
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    stateDir = await mkdtemp(join(tmpdir(), 'df-worker-paths-'));
    const config = loadConfig({
      env: {},
      overrides: {
        'api.url': `http://127.0.0.1:${port}`,
        'api.key': 'k',
        'state.dir': stateDir,
        'http.port': 0,
      },
      require: 'service',
    });
    const handlers = new Map([['echo', defineTask({ key: 'echo', handle: () => ({}) })]]);
    const worker = standaloneDaemon({ config, logger: pino({ level: 'silent' }), handlers });
    const started = worker.start();
    await expect(started).rejects.toBeInstanceOf(PathStyleError);
    const error = (await started.catch((caught: unknown) => caught)) as PathStyleError;
    await worker.stop();
    expect(error.code).toBe('DFW_API_PATH_STYLE_UNKNOWN');
    expect(error.message).toContain('DF_API_URL');
    expect(error.message).toContain('DF_API_PATH_STYLE');
    // One try per spelling, underscore first, and no loop.
    expect(paths).toEqual([
      '/v1/data_factory/tasks?page=0&size=1000',
      '/v1/data-factory/tasks?page=0&size=1000',
    ]);
  });
});
