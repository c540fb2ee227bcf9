import { describe, expect, it } from 'vitest';
import { ResponseValidationError, ServiceError } from '../../src/api/errors.ts';
import { servicePaths } from '../../src/api/paths.ts';
import { parseJsonBody, parseRetryAfter, toServiceError } from '../../src/api/response.ts';
import type { Answer } from '../../src/api/response.ts';
import {
  parseListEnvelope,
  parseServiceFile,
  parseTask,
  parseTaskExecution,
} from '../../src/api/validate.ts';

const noRedact = (text: string) => text;
const answer = (status: number, text: string, headers: Answer['headers'] = {}): Answer => ({
  status,
  text,
  headers,
});

function validationError(run: () => unknown): ResponseValidationError {
  try {
    run();
  } catch (error) {
    if (error instanceof ResponseValidationError) return error;
    throw error;
  }
  throw new Error('expected a ResponseValidationError');
}

describe('parseRetryAfter', () => {
  const now = Date.UTC(2026, 0, 1, 12, 0, 0);

  it('reads delay-seconds as milliseconds', () => {
    expect(parseRetryAfter('7', now)).toBe(7000);
    expect(parseRetryAfter(' 0 ', now)).toBe(0);
  });

  it('reads an HTTP date relative to now and never goes negative', () => {
    expect(parseRetryAfter('Thu, 01 Jan 2026 12:00:30 GMT', now)).toBe(30_000);
    expect(parseRetryAfter('Thu, 01 Jan 2026 11:00:00 GMT', now)).toBe(0);
  });

  it('is undefined when absent or unreadable', () => {
    expect(parseRetryAfter(undefined, now)).toBeUndefined();
    expect(parseRetryAfter('', now)).toBeUndefined();
    expect(parseRetryAfter('soon', now)).toBeUndefined();
  });
});

describe('toServiceError', () => {
  it('takes code and message from the error envelope', () => {
    const body = JSON.stringify({ date: 'x', code: 'INTERNAL', message: 'boom', httpStatusCode: 503 });
    const error = toServiceError('tasks.poll', answer(503, body), noRedact);
    expect(error).toBeInstanceOf(ServiceError);
    expect(error.message).toMatch(/^tasks\.poll answered 503 \(INTERNAL\): boom/);
    expect(error).toMatchObject({
      status: 503,
      code: 'INTERNAL',
      serviceMessage: 'boom',
      bodySnippet: undefined,
    });
    expect(error.retryable).toBe(true);
  });

  it('keeps the first 200 characters of a non-JSON body as the snippet', () => {
    const html = `<html>${'x'.repeat(500)}</html>`;
    const error = toServiceError('tasks.get', answer(502, html), noRedact);
    expect(error.bodySnippet).toBe(html.slice(0, 200));
    expect(error.code).toBeUndefined();
    expect(error.message).toContain('answered 502 with a non-JSON body: <html>');
  });

  it('redacts what the body echoes back', () => {
    const error = toServiceError('tasks.get', answer(400, '{"message":"bad key secret-123"}'), (t) =>
      t.replace('secret-123', '[redacted]'),
    );
    expect(error.message).not.toContain('secret-123');
    expect(error.serviceMessage).toBe('bad key [redacted]');
  });

  it('marks only 408, 429 and 5xx as retryable', () => {
    const retryable = (status: number) => toServiceError('tasks.get', answer(status, ''), noRedact).retryable;
    expect([400, 401, 403, 404, 412, 413].map(retryable)).toEqual([false, false, false, false, false, false]);
    expect([408, 429, 500, 503].map(retryable)).toEqual([true, true, true, true]);
  });
});

describe('parseJsonBody', () => {
  it('rejects an empty or non-JSON 2xx body naming the body', () => {
    expect(validationError(() => parseJsonBody('tasks.get', answer(200, ''))).field).toBe('(body)');
    expect(validationError(() => parseJsonBody('tasks.get', answer(200, '<html>'))).message).toContain(
      'tasks.get answer 200 is not JSON',
    );
  });
});

describe('validators', () => {
  const task = {
    object: 'task',
    id: 't1',
    createdAt: '2026-01-01T00:00:00Z',
    key: 'enrich',
    description: 'd',
    retryCount: 2,
    inputKeys: [{ key: 'sku', description: 'the sku' }],
    outputKeys: [],
  };
  const execution = {
    object: 'task_execution',
    id: 'e1',
    taskId: 't1',
    createdAt: '2026-01-01T00:00:00Z',
    status: 'IN_PROGRESS',
    input: { sku: 'A' },
  };

  it('accepts a documented task and names the bad field of a list element', () => {
    expect(parseTask('tasks.get', task)).toEqual(task);
    const list = { object: 'list', totalElements: 2, data: [task, { ...task, key: 5 }] };
    const error = validationError(() => parseListEnvelope('tasks.list', list, parseTask));
    expect(error.field).toBe('data[1].key');
  });

  it('requires the list envelope fields', () => {
    expect(validationError(() => parseListEnvelope('tasks.list', { data: [] }, parseTask)).field).toBe(
      'totalElements',
    );
    expect(validationError(() => parseListEnvelope('tasks.list', [], parseTask)).field).toBe('(body)');
  });

  it('names the missing id of an execution in the message', () => {
    const { id: _id, ...withoutId } = execution;
    const error = validationError(() => parseTaskExecution('tasks.poll', withoutId));
    expect(error.field).toBe('id');
    expect(error.message).toContain("tasks.poll answer lacks string field 'id'");
  });

  it('rejects an execution whose input is missing, an array or a string', () => {
    for (const input of [undefined, ['a'], 'text', null]) {
      const error = validationError(() => parseTaskExecution('tasks.poll', { ...execution, input }));
      expect(error.field).toBe('input');
    }
  });

  it('names the id of an execution answer it cannot use, with the field and the problem', () => {
    const error = validationError(() => parseTaskExecution('tasks.poll', { ...execution, input: 'oops' }));
    expect(error).toMatchObject({
      operation: 'tasks.poll',
      field: 'input',
      problem: "field 'input' is not an object",
      executionId: 'e1',
    });
    expect(error.message).toBe(
      "tasks.poll answer field 'input' is not an object; the service's answer does not match its " +
        'documented shape (a proxy in between, or an API change): check DF_API_URL and report this if it persists',
    );
  });

  it('names no execution when the answer has no usable string id', () => {
    const { id: _id, ...withoutId } = execution;
    for (const value of [
      withoutId,
      { ...execution, id: '', input: 'oops' },
      { ...execution, id: 7, input: 'oops' },
    ]) {
      const error = validationError(() => parseTaskExecution('tasks.poll', value));
      expect(error.executionId).toBeUndefined();
    }
    const missing = validationError(() => parseTaskExecution('tasks.poll', withoutId));
    expect(missing).toMatchObject({ field: 'id', problem: "lacks string field 'id'" });
    for (const body of [[execution], 'e1', null]) {
      const error = validationError(() => parseTaskExecution('tasks.poll', body));
      expect(error).toMatchObject({ field: '(body)', executionId: undefined });
    }
  });

  it('rejects a record of another type', () => {
    expect(
      validationError(() => parseTaskExecution('tasks.poll', { ...execution, object: 'task' })).field,
    ).toBe('object');
  });

  it('requires only a string id on a file record and keeps its other fields', () => {
    expect(parseServiceFile('files.upload', { id: 'f1', size: 3 })).toEqual({ id: 'f1', size: 3 });
    expect(validationError(() => parseServiceFile('files.upload', { name: 'x' })).field).toBe('id');
  });
});

describe('servicePaths', () => {
  it('spells both path styles under a prefix and encodes ids', () => {
    const hyphen = servicePaths('hyphen', '/proxy/');
    expect(hyphen.poll('a/b c')).toBe('/proxy/v1/data-factory/tasks/a%2Fb%20c/poll');
    expect(hyphen.execution('e1')).toBe('/proxy/v1/data-factory/task-executions/e1');
    expect(hyphen.files()).toBe('/proxy/v2/data-factory/files');
    const underscore = servicePaths('underscore');
    expect(underscore.tasks()).toBe('/v1/data_factory/tasks');
    expect(underscore.execution('e1')).toBe('/v1/data_factory/task_executions/e1');
  });
});

describe('identifiers at the boundary', () => {
  it('refuses an execution whose id or taskId is an empty string, naming the field', () => {
    const base = { object: 'task_execution', id: 'e1', taskId: 't1', status: 'IN_PROGRESS', input: {} };
    for (const field of ['id', 'taskId'] as const) {
      let caught: unknown;
      try {
        parseTaskExecution('tasks.poll', { ...base, [field]: '' });
      } catch (error) {
        caught = error;
      }
      expect(caught).toBeInstanceOf(ResponseValidationError);
      expect((caught as ResponseValidationError).field).toBe(field);
    }
  });
});
