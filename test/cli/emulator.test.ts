// `df-worker emulator` as a process: it serves the variables given with --variable from the start, and stops
// on SIGTERM.
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

describe('df-worker emulator', () => {
  it('serves each --variable by its id, with its version as ETag, from the start', async () => {
    emulator = runCli(
      ['emulator', '--port', '0', '--variable', 'api-token=s3cret', '--variable', 'empty='],
      {},
    );
    const running = emulator;
    await waitFor(() => /^variables: /m.test(running.stdout()), 'the listening line', 20_000);
    const url = /emulator listening on (http:\/\/\S+) /.exec(running.stdout())![1]!;
    expect(running.stdout()).toContain('variables: api-token, empty\n');
    // The key is this run's own, printed at start: the former fixed default is refused.
    const key = /^API key: ([0-9a-f]{32})$/m.exec(running.stdout())![1]!;
    const fixed = await fetch(`${url}/v1/data-factory/variables/api-token`, {
      headers: { 'x-api-key': 'emulator-key' },
    });
    expect(fixed.status).toBe(401);
    const read = await fetch(`${url}/v1/data-factory/variables/api-token`, {
      headers: { 'x-api-key': key },
    });
    expect(read.status).toBe(200);
    expect(read.headers.get('etag')).toBe('"1"');
    expect(await read.json()).toMatchObject({
      id: 'api-token',
      key: 'api-token',
      name: 'api-token',
      value: 's3cret',
    });
    running.child.kill('SIGTERM');
    expect((await running.exited).code).toBe(0);
  });

  it('refuses a --variable without ID=, or the same id twice, as a usage error', async () => {
    const bare = await cli(['emulator', '--variable', 'api-token']);
    expect(bare.code).toBe(2);
    expect(bare.stderr).toContain('--variable takes ID=VALUE');
    const twice = await cli(['emulator', '--variable', 'a=1', '--variable', 'a=2']);
    expect(twice.code).toBe(2);
    expect(twice.stderr).toContain('--variable a is given twice');
  });
});
