import { describe, expect, it } from 'vitest';
import {
  defineTask,
  isNonRetryableError,
  isTaskModule,
  NonRetryableError,
  TaskDefinitionError,
  type TaskSpec,
} from '../../src/handlers/define-task.ts';

const handle = () => ({});

/** Calls defineTask with a spec TypeScript would reject, as a JavaScript handler or a plain object can. */
function defineUnchecked(spec: Record<string, unknown>) {
  return defineTask(spec as unknown as TaskSpec);
}

function definitionError(spec: Record<string, unknown>): TaskDefinitionError {
  try {
    defineUnchecked(spec);
  } catch (error) {
    if (error instanceof TaskDefinitionError) return error;
    throw error;
  }
  throw new Error('defineTask accepted an invalid spec');
}

describe('defineTask', () => {
  it('fills in defaults and turns key shorthands into {key, description}', () => {
    const task = defineTask({
      key: 'enrich',
      inputKeys: ['sku', { key: 'price', description: 'major units' }],
      outputKeys: [{ key: 'slug', description: '' }],
      handle,
    });
    expect(task).toMatchObject({
      key: 'enrich',
      description: '',
      retryCount: 0,
      inputKeys: [
        { key: 'sku', description: '' },
        { key: 'price', description: 'major units' },
      ],
      outputKeys: [{ key: 'slug', description: '' }],
    });
    expect(task.timeoutMs).toBeUndefined();
    expect(isTaskModule(task)).toBe(true);
    expect(Object.isFrozen(task)).toBe(true);
  });

  it('keeps timeoutMs and retryCount when given', () => {
    const task = defineTask({ key: 'slow', retryCount: 3, timeoutMs: 120_000, handle });
    expect(task.retryCount).toBe(3);
    expect(task.timeoutMs).toBe(120_000);
  });

  it('keeps concurrency when given, and leaves it unset by default (no limit of its own)', () => {
    expect(defineTask({ key: 'parallel', concurrency: 3, handle }).concurrency).toBe(3);
    expect(defineTask({ key: 'plain', handle }).concurrency).toBeUndefined();
  });

  it("accepts timeoutMs up to Node's timer limit of 2147483647 ms", () => {
    expect(defineTask({ key: 'month-long', timeoutMs: 2_147_483_647, handle }).timeoutMs).toBe(2_147_483_647);
  });

  it.each([
    [{ key: 42, handle }, 'key', 'must be a non-empty string, got 42'],
    [{ key: '  ', handle }, 'key', 'must be a non-empty string'],
    [{ key: 'a' }, 'handle', 'must be a function, got undefined'],
    [{ key: 'a', handle, retryCount: -1 }, 'retryCount', 'must be an integer >= 0, got -1'],
    [{ key: 'a', handle, retryCount: 1.5 }, 'retryCount', 'must be an integer >= 0'],
    [{ key: 'a', handle, timeoutMs: 0 }, 'timeoutMs', 'must be a positive integer (milliseconds), got 0'],
    [
      { key: 'a', handle, timeoutMs: 2 ** 31 },
      'timeoutMs',
      'must be at most 2147483647 ms (about 24.8 days), got 2147483648',
    ],
    [
      { key: 'a', handle, concurrency: 0 },
      'concurrency',
      'must be a positive integer (executions at once), got 0',
    ],
    [{ key: 'a', handle, concurrency: 1.5 }, 'concurrency', 'must be a positive integer'],
    [{ key: 'a', handle, description: 7 }, 'description', 'must be a string'],
    [{ key: 'a', handle, inputKeys: 'sku' }, 'inputKeys', 'must be an array'],
    [{ key: 'a', handle, inputKeys: ['sku', 'sku'] }, 'inputKeys[1]', 'duplicate key "sku"'],
    [{ key: 'a', handle, outputKeys: [{ key: 'x' }, 'x'] }, 'outputKeys[1]', 'duplicate key "x"'],
    [{ key: 'a', handle, outputKeys: [{ description: 'no key' }] }, 'outputKeys[0].key', 'non-empty string'],
    [{ key: 'a', handle, inputKeys: ['context'] }, 'inputKeys', 'read it from ctx.job'],
    [{ key: 'a', handle, timeout: 5000 }, 'timeout', 'unknown member'],
  ])('rejects %j naming the bad member', (spec, member, message) => {
    const error = definitionError(spec);
    expect(error.member).toBe(member);
    expect(error.message).toContain(`${member}: `);
    expect(error.message).toContain(message);
  });

  it('lists every problem at once and names the task', () => {
    const error = definitionError({ key: 'broken', retryCount: -2, timeoutMs: 'soon' });
    expect(error.taskKey).toBe('broken');
    expect(error.problems.map((p) => p.member)).toEqual(['handle', 'retryCount', 'timeoutMs']);
    expect(error.message).toMatch(/^invalid task "broken": handle: .*; retryCount: .*; timeoutMs: /);
  });

  it('rejects a spec that is not an object', () => {
    expect(() => defineUnchecked(null as unknown as Record<string, unknown>)).toThrow(TaskDefinitionError);
  });
});

describe('NonRetryableError', () => {
  it('is an Error a caller can recognise, also across copies of the module', () => {
    const error = new NonRetryableError('unknown currency "XYZ"');
    expect(error).toBeInstanceOf(Error);
    expect(error.name).toBe('NonRetryableError');
    expect(isNonRetryableError(error)).toBe(true);
    expect(isNonRetryableError(new Error('plain'))).toBe(false);

    const fromOtherCopy = Object.assign(new Error('x'), {
      [Symbol.for('df-worker.NonRetryableError')]: true,
    });
    expect(isNonRetryableError(fromOtherCopy)).toBe(true);
  });
});
