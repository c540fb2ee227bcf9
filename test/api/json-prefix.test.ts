import { describe, expect, it } from 'vitest';
import { topLevelString } from '../../src/api/json-prefix.ts';

const answer = JSON.stringify({
  object: 'task_execution',
  input: { id: 'nested-id', list: [{ id: 'deeper' }], text: 'a "quoted" \\ id' },
  id: 'exec-42',
  taskId: 't-1',
});

describe('topLevelString', () => {
  it('finds a top-level member in a whole answer, not one of the same name nested in a value', () => {
    expect(topLevelString(answer, 'id')).toBe('exec-42');
    expect(topLevelString(answer, 'taskId')).toBe('t-1');
  });

  it('finds it in every prefix that holds the whole value, and in none that cuts it', () => {
    const whole = answer.indexOf('"exec-42"') + '"exec-42"'.length;
    for (let cut = 0; cut <= answer.length; cut++) {
      expect(topLevelString(answer.slice(0, cut), 'id')).toBe(cut >= whole ? 'exec-42' : undefined);
    }
  });

  it('reads escapes in names and values', () => {
    expect(topLevelString('{"i\\u0064":"a\\"b\\\\c","x":1', 'id')).toBe('a"b\\c');
  });

  it('gives nothing for a value that is not a string, for an array, for text that is not JSON', () => {
    expect(topLevelString('{"id":42,"other":"x"}', 'id')).toBeUndefined();
    expect(topLevelString('{"id":null,"x":"id"}', 'id')).toBeUndefined();
    expect(topLevelString('[{"id":"x"}]', 'id')).toBeUndefined();
    expect(topLevelString('<html><body>{"id":"x"}', 'id')).toBeUndefined();
    expect(topLevelString('{"a":{"id":"inner"}}', 'id')).toBeUndefined();
  });
});
