// `df-worker emulator --path-style`: a local service that answers one spelling of the data-factory paths only,
// to try a worker's DF_API_PATH_STYLE=auto against each.
import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from '../daemon/harness.ts';
import { runCli, type CliProcess } from './process.ts';
import { cli } from './run-cli.ts';

let emulator: CliProcess | undefined;

afterEach(async () => {
  if (emulator && emulator.child.exitCode === null) {
    emulator.child.kill('SIGKILL');
    await emulator.exited;
  }
  emulator = undefined;
});

describe('df-worker emulator --path-style', () => {
  it('serves only the underscore spelling when told, the hyphen one answering 404', async () => {
    emulator = runCli(['emulator', '--port', '0', '--key', 'emulator-key', '--path-style', 'underscore'], {});
    const running = emulator;
    await waitFor(() => /^console: /m.test(running.stdout()), 'the listening lines', 20_000);
    const url = /emulator listening on (http:\/\/\S+) /.exec(running.stdout())![1]!;
    const headers = { 'x-api-key': 'emulator-key' };
    expect((await fetch(`${url}/v1/data_factory/tasks`, { headers })).status).toBe(200);
    expect((await fetch(`${url}/v1/data-factory/tasks`, { headers })).status).toBe(404);
    running.child.kill('SIGTERM');
    expect((await running.exited).code).toBe(0);
  });

  it('refuses a spelling it does not know as a usage error', async () => {
    const result = await cli(['emulator', '--path-style', 'camel']);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('--path-style must be one of both, underscore, hyphen, got "camel"');
  });
});
