import { describe, expect, it, vi } from 'vitest';
import type { JsonObject } from '../../src/api/types.ts';
import { ManualClock } from '../../src/clock/manual-clock.ts';
import {
  defineTask,
  NonRetryableError,
  type TaskContext,
  type TaskModule,
  type TaskSummary,
} from '../../src/handlers/define-task.ts';
import { HandlerTimeoutError } from '../../src/runner/errors.ts';
import { runExecution, type RunExecutionArgs } from '../../src/runner/run-execution.ts';
import { drive, execution, recordingLogger, untilSleeping } from './helpers.ts';

const job = { jobAccountId: 'acc-1', jobId: 'job-1', userAccountId: 'acc-2', userId: 'user-1' };

function taskOf(handler: TaskModule, overrides: Partial<TaskSummary> = {}): TaskSummary {
  return {
    id: 'task-1',
    key: handler.key,
    retryCount: handler.retryCount,
    inputKeys: handler.inputKeys,
    outputKeys: handler.outputKeys,
    ...overrides,
  };
}

function setUp(
  handler: TaskModule,
  input: JsonObject,
  options: { task?: Partial<TaskSummary>; shutdownSignal?: AbortSignal } = {},
) {
  const clock = new ManualClock(0);
  const { logger, lines } = recordingLogger();
  const args: RunExecutionArgs = {
    handler,
    task: taskOf(handler, options.task),
    execution: execution(input),
    clock,
    logger,
    defaultTimeoutMs: 5_000,
    backoff: { baseMs: 1_000, maxMs: 30_000, random: () => 0.5 },
    ...(options.shutdownSignal === undefined ? {} : { shutdownSignal: options.shutdownSignal }),
  };
  return { clock, lines, args };
}

describe('runExecution: input', () => {
  it('fails at once listing every missing input key, without calling the handler', async () => {
    const handle = vi.fn(() => ({}));
    const handler = defineTask({ key: 'enrich', inputKeys: ['sku', 'title', 'price'], handle });
    const { clock, args } = setUp(handler, { title: 'Shirt', price: undefined, context: job });
    const outcome = await drive(clock, runExecution(args));
    expect(handle).not.toHaveBeenCalled();
    expect(outcome).toEqual({
      status: 'FAILED',
      output: {
        error: 'missing input keys "sku", "price" (declared in the task inputKeys)',
        missingInputKeys: ['sku', 'price'],
        message: 'missing input keys "sku", "price" (declared in the task inputKeys)',
      },
      attempts: 0,
      durationMs: 0,
      failure: {
        kind: 'input',
        message: 'missing input keys "sku", "price" (declared in the task inputKeys)',
      },
    });
  });

  it('words a single missing key as in the service task', async () => {
    const handler = defineTask({ key: 'enrich', inputKeys: ['sku'], handle: () => ({}) });
    const { clock, args } = setUp(handler, {});
    const outcome = await drive(clock, runExecution(args));
    expect(outcome.output).toEqual({
      error: 'missing input key "sku" (declared in the task inputKeys)',
      missingInputKeys: ['sku'],
      message: 'missing input key "sku" (declared in the task inputKeys)',
    });
  });

  it("checks the service task's inputKeys, not the handler's", async () => {
    const handler = defineTask({ key: 'enrich', inputKeys: ['sku'], handle: () => ({}) });
    const { clock, args } = setUp(
      handler,
      { sku: 'A1' },
      { task: { inputKeys: [{ key: 'ean', description: '' }] } },
    );
    const outcome = await drive(clock, runExecution(args));
    expect(outcome.output.missingInputKeys).toEqual(['ean']);
  });

  it('splits the service context off into ctx.job and hands the rest of the input to the handler', async () => {
    let seen: { input: JsonObject; ctx: TaskContext } | undefined;
    const handler = defineTask({
      key: 'enrich',
      inputKeys: ['sku'],
      handle: (input, ctx) => {
        seen = { input, ctx };
        return {};
      },
    });
    const { clock, args } = setUp(handler, { sku: 'A1', context: job });
    const outcome = await drive(clock, runExecution(args));
    expect(outcome.status).toBe('COMPLETED');
    expect(seen?.input).toEqual({ sku: 'A1' });
    expect(seen?.ctx.job).toEqual(job);
    expect(seen?.ctx.execution.input.context).toEqual(job);
    expect(seen?.ctx).toMatchObject({ attempt: 1, task: { id: 'task-1', key: 'enrich' } });
  });

  it('gives each attempt its own deep copy of the input, so a retry does not see nested changes', async () => {
    const seen: string[] = [];
    const handler = defineTask({
      key: 'normalise',
      retryCount: 1,
      handle: (input: { items: string[]; meta: { source: string } }, ctx) => {
        seen.push(JSON.stringify(input));
        input.items.push('added-by-attempt');
        input.meta.source = 'changed';
        if (ctx.attempt === 1) throw new Error('transient');
        return { count: input.items.length };
      },
    });
    const { clock, args } = setUp(handler, {
      items: ['a'],
      meta: { source: 'feed' },
    });
    const outcome = await drive(clock, runExecution(args));
    const original = '{"items":["a"],"meta":{"source":"feed"}}';
    expect(seen).toEqual([original, original]);
    expect(outcome).toMatchObject({ status: 'COMPLETED', attempts: 2, output: { count: 2 } });
    expect(args.execution.input).toEqual({ items: ['a'], meta: { source: 'feed' } });
  });

  it('gives an empty ctx.job when the execution has no context', async () => {
    let seenJob: unknown;
    const handler = defineTask({ key: 'k', handle: (_input, ctx) => ((seenJob = ctx.job), {}) });
    const { clock, args } = setUp(handler, {});
    await drive(clock, runExecution(args));
    expect(seenJob).toEqual({});
  });
});

describe('runExecution: output', () => {
  it('reports COMPLETED with the handler result after one attempt', async () => {
    const handler = defineTask({ key: 'sum', outputKeys: ['total'], handle: () => ({ total: 3 }) });
    const { clock, args } = setUp(handler, {});
    expect(await drive(clock, runExecution(args))).toEqual({
      status: 'COMPLETED',
      output: { total: 3 },
      attempts: 1,
      durationMs: 0,
    });
  });

  it('fails at once without retrying when a declared output key is missing', async () => {
    const handle = vi.fn(() => ({ subtotal: 2 }));
    const handler = defineTask({ key: 'sum', retryCount: 3, outputKeys: ['subtotal', 'total'], handle });
    const { clock, args } = setUp(handler, {});
    const outcome = await drive(clock, runExecution(args));
    expect(handle).toHaveBeenCalledTimes(1);
    expect(outcome).toMatchObject({
      status: 'FAILED',
      attempts: 1,
      output: { error: 'handler output lacks declared key "total"', missingOutputKeys: ['total'] },
      failure: { kind: 'output' },
    });
  });

  it.each([
    ['an array', [1, 2], 'got an array'],
    ['null', null, 'got null'],
    ['a Map', new Map([['total', 1]]), 'got an instance of Map'],
    ['a string', 'done', 'got a string'],
    ['nothing', undefined, 'got undefined; did the handler forget to return its result?'],
  ])('fails at once when the handler returns %s', async (_name, value, expected) => {
    const handler = defineTask({ key: 'k', retryCount: 2, handle: () => value as unknown as JsonObject });
    const { clock, args } = setUp(handler, {});
    const outcome = await drive(clock, runExecution(args));
    expect(outcome).toMatchObject({ status: 'FAILED', attempts: 1, failure: { kind: 'output' } });
    expect(outcome.output.error).toBe(`handler output must be a plain JSON object, ${expected}`);
  });

  it.each([
    ['a bigint', { total: 1n }, '"total" is a bigint'],
    ['a nested function', { items: [{ format: () => '' }] }, '"items[0].format" is a function'],
    ['NaN', { ratio: Number.NaN }, '"ratio" is NaN, which JSON cannot represent'],
    ['a nested class instance', { tags: new Set(['a']) }, '"tags" is an instance of Set'],
  ])('fails when the output holds %s, naming where', async (_name, value, expected) => {
    const handler = defineTask({ key: 'k', handle: () => value as unknown as JsonObject });
    const { clock, args } = setUp(handler, {});
    const outcome = await drive(clock, runExecution(args));
    expect(outcome.failure?.kind).toBe('output');
    expect(outcome.output.error).toContain(`handler output is not JSON: ${expected}`);
  });

  it('fails on a cycle in the output', async () => {
    const node: JsonObject = { name: 'root' };
    node.self = node;
    const handler = defineTask({ key: 'k', handle: () => node });
    const { clock, args } = setUp(handler, {});
    const outcome = await drive(clock, runExecution(args));
    expect(outcome.output.error).toBe(
      'handler output is not JSON: "self" refers back to an enclosing object (a cycle)',
    );
  });

  it('drops undefined members and serialises dates, as JSON would', async () => {
    const handler = defineTask({
      key: 'k',
      handle: () => ({ at: new Date(Date.UTC(2026, 0, 2)), note: undefined, list: [undefined, 1] }),
    });
    const { clock, args } = setUp(handler, {});
    const outcome = await drive(clock, runExecution(args));
    expect(outcome.status).toBe('COMPLETED');
    expect(outcome.output).toStrictEqual({ at: '2026-01-02T00:00:00.000Z', list: [null, 1] });
  });

  it.each([
    [
      'a getter that throws',
      () => ({
        total: 1,
        get lazy(): number {
          throw new Error('lazy field failed');
        },
      }),
      'handler output could not be read at "lazy": lazy field failed',
    ],
    [
      'a nested getter that throws',
      () => ({
        total: 1,
        nested: {
          get x(): number {
            throw new Error('not loaded');
          },
        },
      }),
      'handler output could not be read at "nested.x": not loaded',
    ],
    [
      'a toJSON that throws',
      () => ({
        total: 1,
        when: {
          toJSON() {
            throw new Error('boom');
          },
        },
      }),
      'handler output could not be read at "when": boom',
    ],
    [
      'a nested proxy whose trap throws',
      () => ({
        total: 1,
        lookup: new Proxy(
          {},
          {
            ownKeys() {
              throw new Error('ownKeys trap failed');
            },
          },
        ),
      }),
      'handler output could not be read at "lookup": ownKeys trap failed',
    ],
    [
      'a proxy whose getPrototypeOf trap throws',
      () =>
        new Proxy(
          {},
          {
            getPrototypeOf() {
              throw new Error('prototype trap failed');
            },
          },
        ),
      'handler output could not be read: prototype trap failed',
    ],
    [
      'output nested deeper than the stack',
      () => {
        let nested: JsonObject = {};
        for (let depth = 0; depth < 100_000; depth++) nested = { nested };
        return { total: 1, nested };
      },
      'handler output could not be read: Maximum call stack size exceeded',
    ],
  ])('fails, not crashes, when reading the output hits %s', async (_name, make, expected) => {
    const handler = defineTask({ key: 'k', retryCount: 2, outputKeys: ['total'], handle: make });
    const { clock, args } = setUp(handler, {});
    const outcome = await drive(clock, runExecution(args));
    expect(outcome).toMatchObject({
      status: 'FAILED',
      attempts: 1,
      output: { error: expected },
      failure: { kind: 'output', message: expected },
    });
  });

  it('calls toJSON once per value, as JSON.stringify does, so a toJSON returning this fails cleanly', async () => {
    const toJSON = vi.fn(function (this: object) {
      return this;
    });
    const handler = defineTask({ key: 'k', handle: () => ({ total: 1, nested: { toJSON } }) });
    const { clock, args } = setUp(handler, {});
    const outcome = await drive(clock, runExecution(args));
    expect(toJSON).toHaveBeenCalledTimes(1);
    expect(toJSON).toHaveBeenCalledWith('nested');
    expect(outcome).toMatchObject({ status: 'FAILED', failure: { kind: 'output' } });
    expect(outcome.output.error).toBe(
      'handler output is not JSON: "nested.toJSON" is a function; convert it to a string, number or plain object',
    );
  });

  it('applies toJSON to array items and leaves out a member whose toJSON gives undefined', async () => {
    const handler = defineTask({
      key: 'k',
      handle: () => ({
        list: [{ toJSON: () => 5 }, { toJSON: () => undefined }],
        hidden: { toJSON: () => undefined },
      }),
    });
    const { clock, args } = setUp(handler, {});
    const outcome = await drive(clock, runExecution(args));
    expect(outcome.output).toStrictEqual({ list: [5, null] });
  });

  it('keeps a "__proto__" key of the output as a member, as JSON.parse made it', async () => {
    const result = JSON.parse('{"__proto__": {"polluted": true}, "n": 1}') as Record<string, unknown>;
    const handler = defineTask({ key: 'k', handle: () => result });
    const { clock, args } = setUp(handler, {});
    const outcome = await drive(clock, runExecution(args));
    expect(JSON.stringify(outcome.output)).toBe('{"__proto__":{"polluted":true},"n":1}');
    expect(Object.getPrototypeOf(outcome.output)).toBe(Object.prototype);
  });

  it('keeps undeclared output keys and logs one warning listing them', async () => {
    const handler = defineTask({
      key: 'k',
      outputKeys: ['total'],
      handle: () => ({ total: 1, debug: 'x', raw: [] }),
    });
    const { clock, lines, args } = setUp(handler, {});
    const outcome = await drive(clock, runExecution(args));
    expect(outcome).toMatchObject({ status: 'COMPLETED', output: { total: 1, debug: 'x', raw: [] } });
    const warnings = lines.filter((l) => l.level === 40);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({
      undeclaredOutputKeys: ['debug', 'raw'],
      taskKey: 'k',
      executionId: 'exec-1',
    });
  });
});

describe('runExecution: retries', () => {
  it('reports FAILED after retryCount + 1 attempts with the last message and no stack trace', async () => {
    const attemptsAt: number[] = [];
    const handler = defineTask({
      key: 'flaky',
      retryCount: 2,
      handle: (_input, ctx) => {
        attemptsAt.push(ctx.attempt);
        throw new TypeError(`upstream refused attempt ${ctx.attempt}`);
      },
    });
    const { clock, lines, args } = setUp(handler, {});
    const outcome = await drive(clock, runExecution(args));
    expect(attemptsAt).toEqual([1, 2, 3]);
    expect(outcome).toMatchObject({
      status: 'FAILED',
      attempts: 3,
      output: { error: 'upstream refused attempt 3', errorName: 'TypeError', attempts: 3 },
      failure: { kind: 'handler', message: 'upstream refused attempt 3' },
    });
    expect(JSON.stringify(outcome.output)).not.toMatch(/\s+at |\.ts:\d+/);

    const failures = lines.filter((l) => l.level === 40);
    expect(failures.map((l) => [l.attempt, l.msg])).toEqual([
      [1, 'attempt failed; retrying'],
      [2, 'attempt failed; retrying'],
      [3, 'attempt failed; not retrying'],
    ]);
  });

  it('retries a rejected promise and completes when a later attempt succeeds', async () => {
    const handler = defineTask({
      key: 'flaky',
      retryCount: 1,
      handle: async (_input, ctx) => {
        await Promise.resolve();
        if (ctx.attempt === 1) throw new Error('503 from upstream');
        return { ok: true };
      },
    });
    const { clock, args } = setUp(handler, {});
    const outcome = await drive(clock, runExecution(args));
    expect(outcome).toMatchObject({ status: 'COMPLETED', attempts: 2, output: { ok: true } });
  });

  it("uses the service task's retryCount over the handler's", async () => {
    const handle = vi.fn(() => {
      throw new Error('nope');
    });
    const handler = defineTask({ key: 'k', retryCount: 5, handle });
    const { clock, args } = setUp(handler, {}, { task: { retryCount: 1 } });
    const outcome = await drive(clock, runExecution(args));
    expect(handle).toHaveBeenCalledTimes(2);
    expect(outcome.attempts).toBe(2);
  });

  it('waits a growing, jittered backoff between attempts on the clock', async () => {
    const startedAt: number[] = [];
    const handler = defineTask({
      key: 'k',
      retryCount: 3,
      handle: () => {
        startedAt.push(clock.now());
        throw new Error('again');
      },
    });
    const { clock, args } = setUp(handler, {});
    const outcome = await drive(clock, runExecution(args));
    // random() = 0.5: half of 1000, 2000 and 4000 ms.
    expect(startedAt).toEqual([0, 500, 1_500, 3_500]);
    expect(outcome.durationMs).toBe(3_500);
  });

  it('does not retry a NonRetryableError', async () => {
    const handle = vi.fn(() => {
      throw new NonRetryableError('unknown currency "XYZ"');
    });
    const handler = defineTask({ key: 'k', retryCount: 4, handle });
    const { clock, args } = setUp(handler, {});
    const outcome = await drive(clock, runExecution(args));
    expect(handle).toHaveBeenCalledTimes(1);
    expect(outcome).toMatchObject({
      status: 'FAILED',
      attempts: 1,
      output: { error: 'unknown currency "XYZ"', errorName: 'NonRetryableError', attempts: 1 },
      failure: { kind: 'handler' },
    });
  });

  it('logs a NonRetryableError, an expected failure, with its message and no stack trace', async () => {
    const handler = defineTask({
      key: 'k',
      retryCount: 4,
      handle: () => {
        throw new NonRetryableError('unknown currency "XYZ"');
      },
    });
    const { clock, args, lines } = setUp(handler, {});
    await drive(clock, runExecution(args));
    const warnings = lines.filter((l) => l.level === 40);
    expect(warnings).toEqual([
      expect.objectContaining({
        msg: 'attempt failed; not retrying',
        error: 'unknown currency "XYZ"',
        errorName: 'NonRetryableError',
      }),
    ]);
    expect(JSON.stringify(warnings)).not.toContain('stack');
    expect(warnings[0]).not.toHaveProperty('err');
  });

  it('truncates long messages to 1000 characters', async () => {
    const handler = defineTask({
      key: 'k',
      handle: () => {
        throw new Error('x'.repeat(5_000));
      },
    });
    const { clock, args } = setUp(handler, {});
    const outcome = await drive(clock, runExecution(args));
    const message = outcome.output.error as string;
    expect(message).toHaveLength(1_000);
    expect(message.endsWith('… (truncated)')).toBe(true);
  });

  it('reports a thrown non-Error value readably', async () => {
    const handler = defineTask({
      key: 'k',
      handle: () => {
        throw 'quota exceeded' as unknown as Error;
      },
    });
    const { clock, args } = setUp(handler, {});
    const outcome = await drive(clock, runExecution(args));
    expect(outcome.output).toMatchObject({
      error: 'handler threw a non-Error value: "quota exceeded"',
      errorName: 'NonErrorThrown',
    });
  });
});

describe('runExecution: timeouts', () => {
  it('stops waiting for a handler that never settles, retries, then reports FAILED kind timeout', async () => {
    const handle = vi.fn(() => new Promise<JsonObject>(() => {}));
    const handler = defineTask({ key: 'stuck', retryCount: 1, timeoutMs: 2_000, handle });
    const { clock, args } = setUp(handler, {});
    const outcome = await drive(clock, runExecution(args));
    expect(handle).toHaveBeenCalledTimes(2);
    expect(outcome).toMatchObject({
      status: 'FAILED',
      attempts: 2,
      // 2000 ms, 500 ms backoff, 2000 ms.
      durationMs: 4_500,
      output: { errorName: 'HandlerTimeoutError', attempts: 2 },
      failure: { kind: 'timeout' },
    });
    expect(outcome.output.error).toMatch(/^handler for task "stuck" did not finish within 2000 ms/);
  });

  it('uses the default timeout for a handler that declares none', async () => {
    const handler = defineTask({ key: 'stuck', handle: () => new Promise<JsonObject>(() => {}) });
    const { clock, args } = setUp(handler, {});
    const outcome = await drive(clock, runExecution(args));
    expect(outcome).toMatchObject({ failure: { kind: 'timeout' }, durationMs: 5_000 });
  });

  it("uses the handler's declared timeoutMs even when it is longer than the default", async () => {
    const handler = defineTask({
      key: 'slow',
      timeoutMs: 8_000,
      handle: () => new Promise<JsonObject>(() => {}),
    });
    const { clock, args } = setUp(handler, {}); // default 5000 ms
    const outcome = await drive(clock, runExecution(args));
    expect(outcome).toMatchObject({ failure: { kind: 'timeout' }, durationMs: 8_000 });
    expect(outcome.output.error).toMatch(/^handler for task "slow" did not finish within 8000 ms/);
  });

  it('aborts ctx.signal at the deadline so a handler can stop its work', async () => {
    let signal: AbortSignal | undefined;
    const handler = defineTask({
      key: 'polite',
      timeoutMs: 1_000,
      handle: (_input, ctx) =>
        new Promise<JsonObject>((_resolve, reject) => {
          signal = ctx.signal;
          ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason as Error));
        }),
    });
    const { clock, args } = setUp(handler, {});
    const running = runExecution(args);
    await untilSleeping(clock);
    expect(signal?.aborted).toBe(false);
    await clock.advance(999);
    expect(signal?.aborted).toBe(false);
    await clock.advance(1);
    const outcome = await running;
    expect(signal?.aborted).toBe(true);
    expect(signal?.reason).toBeInstanceOf(HandlerTimeoutError);
    expect(outcome).toMatchObject({ status: 'FAILED', failure: { kind: 'timeout' }, durationMs: 1_000 });
  });

  it('leaves no timer behind once the handler finishes', async () => {
    const handler = defineTask({ key: 'fast', handle: () => ({}) });
    const { clock, args } = setUp(handler, {});
    await drive(clock, runExecution(args));
    expect(clock.pending).toBe(0);
  });
});

describe('runExecution: shutdown', () => {
  it('stops a running attempt and reports FAILED aborted without further attempts', async () => {
    const shutdown = new AbortController();
    let signal: AbortSignal | undefined;
    const handle = vi.fn((_input: JsonObject, ctx: TaskContext) => {
      signal = ctx.signal;
      return new Promise<JsonObject>(() => {});
    });
    const handler = defineTask({ key: 'long', retryCount: 5, handle });
    const { clock, args } = setUp(handler, {}, { shutdownSignal: shutdown.signal });
    const running = runExecution(args);
    await untilSleeping(clock);
    shutdown.abort(new Error('SIGTERM'));
    const outcome = await running;
    expect(handle).toHaveBeenCalledTimes(1);
    expect(signal?.aborted).toBe(true);
    expect(outcome).toEqual({
      status: 'FAILED',
      output: {
        error: 'worker shut down before the handler finished',
        attempts: 1,
        message: 'worker shut down before the handler finished',
      },
      attempts: 1,
      durationMs: 0,
      failure: { kind: 'aborted', message: 'worker shut down before the handler finished' },
    });
    expect(clock.pending).toBe(0);
  });

  it('stops retrying when the worker shuts down during the backoff', async () => {
    const shutdown = new AbortController();
    const handle = vi.fn(() => {
      throw new Error('flaky');
    });
    const handler = defineTask({ key: 'k', retryCount: 5, handle });
    const { clock, args } = setUp(handler, {}, { shutdownSignal: shutdown.signal });
    const running = runExecution(args);
    await untilSleeping(clock); // the backoff after attempt 1
    shutdown.abort();
    const outcome = await running;
    expect(handle).toHaveBeenCalledTimes(1);
    expect(outcome).toMatchObject({ failure: { kind: 'aborted' }, output: { attempts: 1 } });
  });

  it('does not call the handler when the worker is already shutting down', async () => {
    const handle = vi.fn(() => ({}));
    const handler = defineTask({ key: 'k', handle });
    const { clock, args } = setUp(handler, {}, { shutdownSignal: AbortSignal.abort() });
    const outcome = await drive(clock, runExecution(args));
    expect(handle).not.toHaveBeenCalled();
    expect(outcome).toMatchObject({ status: 'FAILED', attempts: 0, failure: { kind: 'aborted' } });
  });
});

/** Values built to break whatever reads them: getters, traps and prototypes that throw, cycles. */
function revokedProxy(): object {
  const { proxy, revoke } = Proxy.revocable({}, {});
  revoke();
  return proxy;
}

function nullPrototypeCycle(): object {
  const value = Object.create(null) as Record<string, unknown>;
  value.self = value;
  return value;
}

function messageGetterThrows(): object {
  return {
    get message(): string {
      throw new Error('getter');
    },
  };
}

function toJSONReturnsItself(): object {
  return {
    toJSON() {
      return this;
    },
  };
}

const everyTrapThrows = (): object =>
  new Proxy(
    {},
    {
      get: () => {
        throw new Error('get trap');
      },
      has: () => {
        throw new Error('has trap');
      },
      getPrototypeOf: () => {
        throw new Error('getPrototypeOf trap');
      },
      ownKeys: () => {
        throw new Error('ownKeys trap');
      },
    },
  );

describe('runExecution: poisonous values from a handler', () => {
  it.each([
    [
      'a null-prototype object with a cycle',
      nullPrototypeCycle,
      'handler threw a non-Error value: [object Object]',
    ],
    [
      'an object whose message getter throws',
      messageGetterThrows,
      'handler threw a non-Error value: [object Object]',
    ],
    [
      'an object whose toString and toPrimitive throw',
      () => ({
        big: 1n,
        [Symbol.toPrimitive]() {
          throw new Error('no primitive');
        },
      }),
      'handler threw a non-Error value: [object Object]',
    ],
    [
      'a revoked proxy',
      revokedProxy,
      'handler threw a non-Error value: a value that cannot be read (its getters or proxy traps throw)',
    ],
    [
      'a proxy whose every trap throws',
      everyTrapThrows,
      'handler threw a non-Error value: a value that cannot be read (its getters or proxy traps throw)',
    ],
  ])('reports FAILED when the handler throws %s', async (_name, make, expected) => {
    const handler = defineTask({
      key: 'k',
      retryCount: 1,
      handle: () => {
        throw make() as Error;
      },
    });
    const { clock, lines, args } = setUp(handler, {});
    const outcome = await drive(clock, runExecution(args));
    expect(outcome).toMatchObject({
      status: 'FAILED',
      attempts: 2,
      output: { error: expected, errorName: 'NonErrorThrown', attempts: 2 },
      failure: { kind: 'handler', message: expected },
    });
    const warnings = lines.filter((l) => l.level === 40);
    expect(warnings.map((l) => [l.msg, l.error, l.err])).toEqual([
      ['attempt failed; retrying', expected, undefined],
      ['attempt failed; not retrying', expected, undefined],
    ]);
  });

  it.each([
    ['is frozen', () => Object.freeze(new Error('frozen failure'))],
    [
      'has a getter that throws',
      () =>
        Object.defineProperty(new Error('lazy failure'), 'details', {
          enumerable: true,
          get() {
            throw new Error('details getter');
          },
        }),
    ],
    [
      'has a cause function that throws',
      () =>
        Object.assign(new Error('caused failure'), {
          cause: () => {
            throw new Error('cause');
          },
        }),
    ],
  ])('reports and logs a thrown Error that pino cannot serialise (it %s)', async (_name, make) => {
    const thrown: Error = make();
    const handler = defineTask({
      key: 'k',
      handle: () => {
        throw thrown;
      },
    });
    const { clock, lines, args } = setUp(handler, {});
    const outcome = await drive(clock, runExecution(args));
    expect(outcome).toMatchObject({
      status: 'FAILED',
      output: { error: thrown.message, errorName: 'Error', attempts: 1 },
      failure: { kind: 'handler' },
    });
    const warning = lines.find((l) => l.msg === 'attempt failed; not retrying');
    expect(warning).toMatchObject({ error: thrown.message, errorName: 'Error' });
    expect(warning).not.toHaveProperty('err');
  });

  it('still logs a serialisable Error under err, with its stack', async () => {
    const handler = defineTask({
      key: 'k',
      handle: () => {
        throw new RangeError('out of range');
      },
    });
    const { clock, lines, args } = setUp(handler, {});
    await drive(clock, runExecution(args));
    const warning = lines.find((l) => l.msg === 'attempt failed; not retrying');
    expect(warning?.err).toMatchObject({ type: 'RangeError', message: 'out of range' });
    expect((warning?.err as { stack?: string }).stack).toContain('RangeError: out of range');
  });

  it('keeps the message of an Error whose cause getter throws', async () => {
    const thrown = Object.defineProperty(new Error('fetch failed'), 'cause', {
      get() {
        throw new Error('cause getter');
      },
    });
    const handler = defineTask({
      key: 'k',
      handle: () => {
        throw thrown;
      },
    });
    const { clock, args } = setUp(handler, {});
    const outcome = await drive(clock, runExecution(args));
    expect(outcome.output).toMatchObject({ error: 'fetch failed', errorName: 'Error' });
  });

  it.each([
    ['a revoked proxy', revokedProxy, 'handler', "Cannot perform 'get' on a proxy that has been revoked"],
    ['a proxy whose every trap throws', everyTrapThrows, 'handler', 'get trap'],
    [
      'a null-prototype object with a cycle',
      nullPrototypeCycle,
      'output',
      'handler output is not JSON: "self" refers back to an enclosing object (a cycle)',
    ],
    [
      'an object whose message getter throws',
      messageGetterThrows,
      'output',
      'handler output could not be read at "message": getter',
    ],
    [
      'an object whose toJSON returns itself',
      toJSONReturnsItself,
      'output',
      'handler output is not JSON: "toJSON" is a function; convert it to a string, number or plain object',
    ],
  ])('reports FAILED when the handler returns %s', async (_name, make, kind, expected) => {
    const handler = defineTask({ key: 'k', handle: () => make() as JsonObject });
    const { clock, args } = setUp(handler, {});
    const outcome = await drive(clock, runExecution(args));
    expect(outcome).toMatchObject({
      status: 'FAILED',
      attempts: 1,
      output: { error: expected },
      failure: { kind },
    });
  });

  it.each([
    ['a revoked proxy', revokedProxy, 'handler output could not be read at "nested": Cannot perform'],
    [
      'a proxy whose every trap throws',
      everyTrapThrows,
      'handler output could not be read at "nested": get trap',
    ],
    [
      'a null-prototype object with a cycle',
      nullPrototypeCycle,
      'handler output is not JSON: "nested.self" refers back to an enclosing object (a cycle)',
    ],
    [
      'an object whose message getter throws',
      messageGetterThrows,
      'handler output could not be read at "nested.message": getter',
    ],
    [
      'an object whose toJSON returns itself',
      toJSONReturnsItself,
      'handler output is not JSON: "nested.toJSON" is a function',
    ],
  ])(
    'reports FAILED kind output when the handler returns an output holding %s',
    async (_name, make, expected) => {
      const handler = defineTask({ key: 'k', retryCount: 1, handle: () => ({ total: 1, nested: make() }) });
      const { clock, args } = setUp(handler, {});
      const outcome = await drive(clock, runExecution(args));
      expect(outcome).toMatchObject({ status: 'FAILED', attempts: 1, failure: { kind: 'output' } });
      expect(outcome.output.error).toContain(expected);
    },
  );
});
