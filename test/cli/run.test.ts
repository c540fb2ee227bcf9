// `df-worker run`: input parsing (positions of JSON errors), which load failures stop a run, and the command
// as a real process: output on stdout, summary on stderr, exit code by status.
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { humanLogLines, runCommand, splitLoadErrors, summariseOutcome } from '../../src/cli/commands/run.ts';
import {
  describeJsonError,
  InputError,
  jsonErrorOffset,
  readInputArgument,
} from '../../src/cli/shared/json-input.ts';
import { HandlerLoadError } from '../../src/handlers/load-errors.ts';
import { READ_SECRET_HANDLER } from './fixtures/read-secret-handler.ts';
import { captureOutput, cli, tempDir } from './run-cli.ts';

const ECHO_HANDLER = `import { defineTask } from 'df-worker';

type Input = { name: unknown };

export default defineTask<Input, { greeting: string; jobId: string | null }>({
  key: 'echo',
  inputKeys: ['name'],
  outputKeys: ['greeting', 'jobId'],
  handle(input, ctx) {
    ctx.logger.info({ name: input.name }, 'greeting');
    return { greeting: \`Hello, \${String(input.name)}\`, jobId: ctx.job.jobId ?? null };
  },
});
`;

async function handlersDir(): Promise<string> {
  return tempDir({
    'echo.ts': ECHO_HANDLER,
    'broken.ts': 'export default defineTask({ key: "broken", handle() { return {} } ;\n',
  });
}

describe('readInputArgument', () => {
  it('parses inline JSON and @file relative to the working directory', async () => {
    const dir = await tempDir({ 'in/input.json': '{"name": "Ada", "context": {"jobId": "j1"}}' });
    expect(await readInputArgument('{"name":"Ada"}', '/')).toEqual({ name: 'Ada' });
    expect(await readInputArgument('@in/input.json', dir)).toEqual({ name: 'Ada', context: { jobId: 'j1' } });
  });

  it('rejects a missing file, invalid JSON and a JSON value that is not an object', async () => {
    const dir = await tempDir();
    await expect(readInputArgument('@nope.json', dir)).rejects.toThrow(
      `cannot read the --input file ${path.join(dir, 'nope.json')} (it does not exist)`,
    );
    await expect(readInputArgument('{"a": tru}', dir)).rejects.toThrow(
      '--input is not valid JSON: unexpected "}" at line 1, column 10 (position 9)',
    );
    await expect(readInputArgument('[1, 2]', dir)).rejects.toThrow(/must be a JSON object .*, got an array/);
    await expect(readInputArgument('null', dir)).rejects.toBeInstanceOf(InputError);
  });
});

describe('jsonErrorOffset', () => {
  it.each([
    '{x',
    '{"a":1',
    '{"a":1}}',
    '{"a":1,}',
    '{"a":01}',
    '{"a":"\u0001"}',
    '{\n  "a": 1\n  "b": 2\n}',
    '{"a": "\\q"}',
  ])('agrees with V8 where V8 gives a position: %j', (text) => {
    const v8 = /at position (\d+)/.exec(errorOf(() => JSON.parse(text)))?.[1];
    expect(v8).toBeDefined();
    expect(jsonErrorOffset(text)).toBe(Number(v8));
  });

  it('places the errors V8 reports without a position', () => {
    expect(jsonErrorOffset('hello')).toBe(0);
    expect(jsonErrorOffset('{"a": [1, 2, }')).toBe(13);
    expect(jsonErrorOffset('[1,]')).toBe(3);
    expect(jsonErrorOffset('')).toBe(0);
    expect(describeJsonError('{"a":\n  nope}')).toBe('unexpected "o" at line 2, column 4 (position 9)');
    expect(describeJsonError('{"a": 1')).toBe('unexpected end of input at line 1, column 8 (position 7)');
  });

  it('finds nothing wrong in valid JSON', () => {
    const text = ' {"a": [1, -2.5e3, true, false, null, "x\\u00e9\\n"], "b": {}} ';
    expect(JSON.parse(text)).toBeTruthy();
    expect(jsonErrorOffset(text)).toBeUndefined();
  });
});

describe('splitLoadErrors', () => {
  it("treats the file named after the key and a duplicate of the key as the wanted task's failures", () => {
    const own = new HandlerLoadError('/h/enrich.ts', 'syntax error');
    const duplicate = new HandlerLoadError(
      '/h/a.ts',
      'task key "enrich" is defined in "/h/a.ts" and "/h/b.ts"',
    );
    const other = new HandlerLoadError('/h/other.mjs', 'has no default export');
    expect(splitLoadErrors([own, duplicate, other], 'enrich')).toEqual({
      wanted: [own, duplicate],
      others: [other],
    });
  });
});

describe('summariseOutcome and humanLogLines', () => {
  it('says status, attempts, duration and why it failed in one line', () => {
    expect(summariseOutcome('k', { status: 'COMPLETED', output: {}, attempts: 1, durationMs: 12.4 })).toBe(
      'k: COMPLETED, 1 attempt, 12 ms',
    );
    const failed = summariseOutcome('k', {
      status: 'FAILED',
      output: {},
      attempts: 3,
      durationMs: 2000,
      failure: { kind: 'timeout', message: 'too slow' },
    });
    expect(failed).toBe('k: FAILED, 3 attempts, 2000 ms (timeout: too slow)');
  });

  it('prints log lines as level, message and the fields that say something', () => {
    let written = '';
    const destination = humanLogLines({ write: (text: string) => (written += text) });
    destination.write(
      `${JSON.stringify({ level: 40, time: 1, name: 'df-worker', executionId: 'local-1', taskKey: 'k', err: { message: 'boom', stack: 'at x' }, msg: 'attempt failed' })}\n`,
    );
    expect(written).toBe('warn: attempt failed {"taskKey":"k","err":"boom"}\n');
  });
});

describe('df-worker run options', () => {
  it.each([
    [['echo'], /give the input/],
    [['--input', '{}'], /give the task key/],
    [['echo', '--input', '{}', '--retries=-1'], /--retries must be a whole number from 0/],
    [['echo', '--input', '{}', '--timeout-ms', '0'], /--timeout-ms must be a whole number from 1/],
    [['echo', '--input', '{}', '--wat'], /Unknown option '--wat'/],
  ])('rejects %j as a usage error (exit 2)', async (args, message) => {
    const result = await captureOutput(() => runCommand.run(args));
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(message);
    expect(result.stdout).toBe('');
  });
});

describe('df-worker run', () => {
  it('prints the output of a COMPLETED run, passes context as ctx.job, warns about other broken files', async () => {
    const dir = await handlersDir();
    const inputDir = await tempDir({ 'input.json': '{"name": "Ada", "context": {"jobId": "job-7"}}' });
    const result = await cli(['run', 'echo', '--input', '@input.json', '--dir', dir], {}, inputDir);
    expect(result.code).toBe(0);
    expect(result.stdout).toBe(`${JSON.stringify({ greeting: 'Hello, Ada', jobId: 'job-7' }, null, 2)}\n`);
    expect(result.stderr).toContain(`warning: ${path.join(dir, 'broken.ts')}: syntax error`);
    expect(result.stderr).toMatch(/^echo: COMPLETED, 1 attempt, \d+ ms$/m);
  });

  it('gives the handler a private ctx.tmpDir under TMPDIR and removes it when the run ends', async () => {
    const dir = await tempDir({
      'scratch.ts': `import { statSync, writeFileSync } from 'node:fs';
import { defineTask } from 'df-worker';
export default defineTask({
  key: 'scratch',
  outputKeys: ['dir', 'mode'],
  handle(_input, ctx) {
    writeFileSync(ctx.tmpDir + '/scratch.txt', 'x');
    return { dir: ctx.tmpDir, mode: statSync(ctx.tmpDir).mode & 0o777 };
  },
});
`,
    });
    const scratchRoot = await tempDir();
    const result = await cli(['run', 'scratch', '--input', '{}', '--dir', dir], { TMPDIR: scratchRoot });
    expect(result.code).toBe(0);
    const output = JSON.parse(result.stdout) as { dir: string; mode: number };
    expect(path.dirname(output.dir)).toBe(scratchRoot);
    expect(output.mode).toBe(0o700);
    // Node's compile cache lives there too; no attempt folder is left.
    const left = (await readdir(scratchRoot)).filter((name) => name.startsWith('df-worker-attempt-'));
    expect(left).toEqual([]);
    expect(path.basename(output.dir)).toMatch(/^df-worker-attempt-/);
  });

  it('answers ctx.service from an emulator of the service started for the run, and lists the calls', async () => {
    const dir = await tempDir({
      'report.ts': `import { defineTask } from 'df-worker';
export default defineTask({
  key: 'report',
  outputKeys: ['fileId', 'name'],
  async handle(_input, ctx) {
    const file = await ctx.service.files.upload({ name: 'out.csv', data: 'a,b\\n1,2\\n', contentType: 'text/csv' });
    const again = await ctx.service.files.get(file.id);
    return { fileId: file.id, name: again.name ?? null };
  },
});
`,
    });
    const result = await cli(['run', 'report', '--input', '{}', '--dir', dir]);
    expect(result.code).toBe(0);
    const output = JSON.parse(result.stdout) as { fileId?: unknown; name?: unknown };
    expect(typeof output.fileId).toBe('string');
    expect(output.name).toBe('out.csv');
    expect(result.stderr).toContain(
      'ctx.service: files.upload 201, files.get 200 (answered by an emulator of the service)',
    );
  });

  it('holds each --variable in that emulator, for ctx.service.variables.get, and warns of unknown DF_* variables', async () => {
    const dir = await tempDir({ 'read-secret.ts': READ_SECRET_HANDLER });
    const result = await cli(
      [
        'run',
        'read-secret',
        '--input',
        '{}',
        '--dir',
        dir,
        '--variable',
        'api-token=s3cret',
        '--variable',
        'region=eu=n',
      ],
      { DF_CONCURENCY: '2' },
    );
    expect(result.code).toBe(0);
    expect(JSON.parse(result.stdout)).toEqual({ token: 's3cret', region: 'eu=n', etag: '"1"' });
    expect(result.stderr).toContain(
      'df-worker run: warning DFW_CONFIG_UNKNOWN_SETTING: DF_CONCURENCY is not a df-worker setting; did you mean DF_CONCURRENCY?\n',
    );
    expect(result.stderr).toContain('ctx.service: variables.get 200, variables.get 200');
    const missing = await cli(['run', 'read-secret', '--input', '{}', '--dir', dir]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/No variable has id 'api-token'/);
    const bad = await cli(['run', 'read-secret', '--input', '{}', '--dir', dir, '--variable', 'api-token']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--variable takes ID=VALUE');
  });

  it('exits 1 with the FAILED output when a declared input key is missing', async () => {
    const dir = await handlersDir();
    const result = await cli(['run', 'echo', '--input', '{"context": {}}', '--dir', dir, '--retries', '2']);
    expect(result.code).toBe(1);
    expect(JSON.parse(result.stdout)).toMatchObject({ missingInputKeys: ['name'] });
    expect(result.stderr).toMatch(/^echo: FAILED, 0 attempts, \d+ ms \(input: missing input key "name"/m);
  });

  it('exits 2 on invalid JSON, giving the position, before loading any handler', async () => {
    const result = await cli(['run', 'echo', '--input', '{"name": Ada}', '--dir', '/nonexistent']);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(
      '--input is not valid JSON: unexpected "A" at line 1, column 10 (position 9)',
    );
    expect(result.stdout).toBe('');
  });

  it('exits 1 on an unknown key, listing the keys it knows', async () => {
    const dir = await handlersDir();
    const result = await cli(['run', 'ehco', '--input', '{}', '--dir', dir]);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(`no handler for task key "ehco" in ${dir}; known keys: echo`);
    expect(result.stdout).toBe('');
  });

  it("exits 1 naming the file when the wanted handler's own file fails to load", async () => {
    const dir = await handlersDir();
    const result = await cli(['run', 'broken', '--input', '{}', '--dir', dir]);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(
      `df-worker run: error DFW_HANDLER_LOAD: ${path.join(dir, 'broken.ts')}: syntax error`,
    );
    expect(result.stderr).not.toContain('warning:');
  });
});

function errorOf(run: () => unknown): string {
  try {
    run();
  } catch (error) {
    return (error as Error).message;
  }
  return '';
}
