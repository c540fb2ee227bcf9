// How a start-up failure is printed: every failing handler file exactly once, other aggregates with their causes.
import { describe, expect, it } from 'vitest';
import { HandlerLoadError, HandlerLoadErrors } from '../../src/handlers/load-errors.ts';
import { describeStartupFailure } from '../../src/cli/run-daemon.ts';

function occurrences(text: string, part: string): number {
  return text.split(part).length - 1;
}

describe('describeStartupFailure', () => {
  it('names each failing handler file once, not once in the message and again from the error list', () => {
    const error = new HandlerLoadErrors('/srv/handlers', [
      new HandlerLoadError('/srv/handlers/helpers.ts', 'has no default export'),
      new HandlerLoadError('/srv/handlers/broken.ts', 'syntax error: Unexpected token'),
    ]);
    const text = describeStartupFailure(error);
    expect(text).toMatch(/^2 handler modules in "\/srv\/handlers" failed to load/);
    expect(occurrences(text, '/srv/handlers/helpers.ts: has no default export')).toBe(1);
    expect(occurrences(text, '/srv/handlers/broken.ts: syntax error')).toBe(1);
  });

  it('lists the causes of an aggregate whose message does not already give them', () => {
    const error = new AggregateError(
      [new Error('connect ECONNREFUSED 127.0.0.1:1'), new Error('connect ECONNREFUSED ::1:1')],
      'could not reach the service',
    );
    expect(describeStartupFailure(error)).toBe(
      'could not reach the service\n  - connect ECONNREFUSED 127.0.0.1:1\n  - connect ECONNREFUSED ::1:1',
    );
  });
});
