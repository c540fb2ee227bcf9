import * as v from 'valibot';
import { describe, expect, it } from 'vitest';
import { isPlainObject, plainObject } from '../../src/schema/plain-object.ts';
import { issuePath, record } from '../../src/schema/record.ts';

const firstIssue = (schema: v.GenericSchema, value: unknown) => {
  const result = v.safeParse(schema, value, { abortEarly: true });
  if (result.success) throw new Error('expected an issue');
  return result.issues[0];
};

describe('record', () => {
  const schema = record(
    {
      id: v.string((issue) => `id must be a string, got ${typeof issue.input}`),
      tags: v.optional(
        v.array(record({ key: v.string('key is not a string') }, () => 'tag is not an object')),
      ),
    },
    () => 'not a record',
  );

  it('words a missing member with its own message, as if it were given undefined', () => {
    expect(firstIssue(schema, {}).message).toBe('id must be a string, got undefined');
    expect(firstIssue(schema, { id: 'a', tags: [{}] }).message).toBe('key is not a string');
  });

  it('refuses an array, which valibot would take for an object', () => {
    expect(firstIssue(schema, []).message).toBe('not a record');
    expect(firstIssue(schema, { id: 'a', tags: [[]] }).message).toBe('tag is not an object');
  });

  it('locates an issue as a user writes the path', () => {
    expect(issuePath(firstIssue(schema, { id: 'a', tags: [{ key: 'x' }, { key: 5 }] }))).toBe('tags[1].key');
    expect(issuePath(firstIssue(schema, null))).toBe('');
  });
});

describe('isPlainObject', () => {
  it('accepts what JSON.parse makes for {...} and nothing JSON would flatten', () => {
    expect(isPlainObject(JSON.parse('{"a":1}'))).toBe(true);
    expect(isPlainObject(Object.create(null))).toBe(true);
    expect([[], null, 'x', new Date(), new Map()].some(isPlainObject)).toBe(false);
    expect(v.is(plainObject('not an object'), { a: 1 })).toBe(true);
  });
});
