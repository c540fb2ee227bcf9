// One catalogue of error codes: every error class df-worker declares has a code there (or is internal to its
// module), sets that code, and every code is in the generated table; logs and the CLI show the code.
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { ServiceError, TimeoutError } from '../../src/api/errors.ts';
import { ConfigError } from '../../src/config/errors.ts';
import { listSettings } from '../../src/config/schema.ts';
import { errorCodesTable } from '../../src/docs/reference.ts';
import {
  describeError,
  ERROR_CATALOGUE,
  errorCodeOf,
  INTERNAL_ERRORS,
  type ErrorCode,
} from '../../src/errors/catalogue.ts';
import { HandlerCrashError, HandlerTimeoutError } from '../../src/runner/errors.ts';
import { createLogger } from '../../src/telemetry/logger.ts';
import { REPO_ROOT } from '../cli/run-cli.ts';

/** Classes whose own `code` is the service's (NOT_FOUND, ...): their catalogue code goes by their class name. */
const SERVICE_CODE = new Set(['ServiceError', 'PreconditionFailedError']);

interface Declaration {
  name: string;
  file: string;
  body: string;
}

async function sourceFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true, recursive: true });
  return entries
    .filter((entry) => entry.isFile() && entry.name.endsWith('.ts'))
    .map((entry) => path.join(entry.parentPath, entry.name));
}

/** Every `class X extends ...Error` in src/, with its body up to the class's closing brace. */
async function errorClasses(): Promise<Declaration[]> {
  const found: Declaration[] = [];
  for (const file of await sourceFiles(path.join(REPO_ROOT, 'src'))) {
    const text = await readFile(file, 'utf8');
    // The body runs to the first line that is a lone `}`, or is empty for a class written `{}`.
    for (const match of text.matchAll(
      /^(?:export )?class (\w+) extends (\w+)(?:<[^>]*>)? \{(\}|.*?^\})/gms,
    )) {
      const [, name, base, body] = match;
      if (!/Error$/.test(base!) && !/Error$/.test(name!)) continue;
      found.push({ name: name!, file: path.relative(REPO_ROOT, file), body: body! });
    }
  }
  return found;
}

const catalogued = new Map<string, ErrorCode>(
  Object.entries(ERROR_CATALOGUE).flatMap(([code, entry]) =>
    entry.errors.map((name) => [name, code as ErrorCode] as const),
  ),
);

describe('the error catalogue', () => {
  it('has a code for every error class declared in src/, and no class that is gone', async () => {
    const classes = await errorClasses();
    expect(classes.length).toBeGreaterThan(30);
    const names = new Set(classes.map((c) => c.name));
    const missing = classes.filter((c) => !catalogued.has(c.name) && !INTERNAL_ERRORS.includes(c.name));
    expect(missing.map((c) => `${c.file}: ${c.name}`)).toEqual([]);
    expect([...catalogued.keys(), ...INTERNAL_ERRORS].filter((name) => !names.has(name))).toEqual([]);
  });

  it("has each class set its catalogue code as its own `code`, except where that is the service's", async () => {
    const wrong = (await errorClasses())
      .filter((c) => catalogued.has(c.name) && !SERVICE_CODE.has(c.name))
      .filter((c) => !new RegExp(`readonly code\\b[^=\\n]*= '${catalogued.get(c.name)}'`).test(c.body));
    expect(wrong.map((c) => `${c.file}: ${c.name} should set code ${catalogued.get(c.name)}`)).toEqual([]);
  });

  it('names each code DFW_*, gives each a meaning of one line, and each class one code', () => {
    for (const [code, entry] of Object.entries(ERROR_CATALOGUE)) {
      expect(code).toMatch(/^DFW_[A-Z]+(_[A-Z]+)*$/);
      expect(entry.meaning).not.toContain('\n');
      expect(entry.errors.length).toBeGreaterThan(0);
    }
    const classes = Object.values(ERROR_CATALOGUE).flatMap((entry) => entry.errors);
    expect(new Set(classes).size).toBe(classes.length);
  });

  it('names only DF_* settings that exist in the configuration schema', () => {
    const settings = new Set(listSettings().map(({ entry }) => entry.env));
    const named = Object.values(ERROR_CATALOGUE).flatMap((entry) => entry.meaning.match(/DF_[A-Z_]+/g) ?? []);
    expect(named.length).toBeGreaterThan(3);
    // DF_CONFIG names the file itself; a name ending in `_` is a family (`DF_*`, `DF_API_*_TIMEOUT_MS`).
    const unknown = named.filter((env) => !settings.has(env) && env !== 'DF_CONFIG' && !env.endsWith('_'));
    expect(unknown).toEqual([]);
  });

  it('is documented: every code is a row of the generated table in src/errors/README.md', async () => {
    const guide = await readFile(path.join(REPO_ROOT, 'src/errors/README.md'), 'utf8');
    expect(guide).toContain(errorCodesTable());
    for (const code of Object.keys(ERROR_CATALOGUE)) expect(guide).toContain(`| \`${code}\` |`);
    const readme = await readFile(path.join(REPO_ROOT, 'README.md'), 'utf8');
    expect(readme).toMatch(/^## Error codes$/m);
    // Absolute: the README ships in the package, src/errors/README.md does not (test/docs/shipped-links.test.ts).
    expect(readme).toContain('(https://github.com/df-worker/df-worker/blob/main/src/errors/README.md)');
  });
});

describe('errorCodeOf and describeError', () => {
  it("read an error's own code, or its class's for a ServiceError and for classes without one yet", () => {
    expect(errorCodeOf(new ConfigError([{ setting: 'concurrency', message: 'must be >= 1' }]))).toBe(
      'DFW_CONFIG_INVALID',
    );
    const refused = new ServiceError({ operation: 'tasks.get', status: 404, code: 'NOT_FOUND' });
    expect(refused.code).toBe('NOT_FOUND');
    expect(errorCodeOf(refused)).toBe('DFW_API_STATUS');
    expect(errorCodeOf(Object.assign(new Error('x'), { name: 'StartupError' }))).toBe('DFW_STARTUP_FAILED');
    expect(errorCodeOf(new Error('plain'))).toBeUndefined();
    expect(errorCodeOf(Object.assign(new Error('fs'), { code: 'ENOENT' }))).toBeUndefined();
    expect(errorCodeOf('a string')).toBeUndefined();
  });

  it("keeps HandlerCrashError beside the runner's other errors, with its code", () => {
    expect(new HandlerCrashError('exited with code 1')).toMatchObject({
      name: 'HandlerCrashError',
      code: 'DFW_HANDLER_CRASH',
    });
    expect(new HandlerTimeoutError('t', 5)).toMatchObject({ code: 'DFW_HANDLER_TIMEOUT' });
  });

  it('print a catalogued error as `error CODE: text`, anything else as its text alone', () => {
    const timeout = new TimeoutError('tasks.poll', 'connect', 'no answer within 5000 ms', undefined, {
      sent: false,
    });
    expect(describeError(timeout)).toBe('error DFW_API_TIMEOUT: no answer within 5000 ms');
    expect(describeError(timeout, 'could not start: x')).toBe('error DFW_API_TIMEOUT: could not start: x');
    expect(describeError(new Error('plain'))).toBe('plain');
  });
});

describe('log lines', () => {
  function captureLogger(): {
    logger: ReturnType<typeof createLogger>;
    lines: () => Record<string, unknown>[];
  } {
    const chunks: string[] = [];
    const destination = new Writable({
      write(chunk: Buffer, _encoding, done) {
        chunks.push(chunk.toString());
        done();
      },
    });
    const logger = createLogger({ level: 'info', destination });
    const lines = () =>
      chunks
        .join('')
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as Record<string, unknown>);
    return { logger, lines };
  }

  it("carry the error's code, and the catalogue's for a class that sets none", () => {
    const { logger, lines } = captureLogger();
    logger.error({ err: new ConfigError([{ setting: 'concurrency', message: 'bad' }]) }, 'refused');
    logger.error({ err: Object.assign(new Error('no task'), { name: 'StartupError' }) }, 'refused');
    logger.error(
      { err: new ServiceError({ operation: 'tasks.get', status: 404, code: 'NOT_FOUND' }) },
      'gone',
    );
    logger.error({ err: new Error('plain') }, 'plain');
    expect(lines().map((line) => (line.err as { code?: unknown }).code)).toEqual([
      'DFW_CONFIG_INVALID',
      'DFW_STARTUP_FAILED',
      'NOT_FOUND',
      undefined,
    ]);
  });
});
