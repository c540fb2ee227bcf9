import * as v from 'valibot';
import { describe, expect, it } from 'vitest';
import { FORMAT, formatSchema } from '../../src/config/formats.ts';

const problem = (format: string, value: unknown, bounds = {}) => {
  const result = v.safeParse(formatSchema(format, bounds), value, { abortEarly: true });
  return result.success ? undefined : result.issues[0].message;
};

describe('formatSchema', () => {
  it('words a bad value as what the setting must be, to follow "DF_SETTING (setting): "', () => {
    expect(problem(FORMAT.integer, 0, { min: 1, max: 256 })).toBe('must be an integer between 1 and 256');
    expect(problem(FORMAT.integer, 1.5, { min: 0 })).toBe('must be an integer of at least 0');
    expect(problem(FORMAT.number, '0.5', { max: 1 })).toBe('must be a number of at most 1');
    expect(problem(FORMAT.boolean, 'yes')).toBe('must be true or false');
    expect(problem(FORMAT.booleanOrAuto, 'colour')).toBe('must be auto, true or false');
    expect(problem(FORMAT.string, ' ', { nonEmpty: true })).toBe('must not be empty');
    expect(problem(FORMAT.oneOf, 'x', { values: ['a', 'b'] })).toBe('must be one of a, b');
    expect(problem(FORMAT.timeZone, 'Mars/Olympus')).toBe(
      'must be an IANA time zone such as UTC or Europe/Paris',
    );
    expect(problem(FORMAT.httpUrl, 'http://h/v1/data-factory')).toMatch(
      /^must not end in \/v1\/data-factory/,
    );
  });

  it('accepts the values the settings document', () => {
    expect(problem(FORMAT.integer, 256, { min: 1, max: 256 })).toBeUndefined();
    expect(problem(FORMAT.booleanOrAuto, 'auto')).toBeUndefined();
    expect(problem(FORMAT.httpUrl, '')).toBeUndefined();
    expect(problem(FORMAT.httpUrl, 'https://api.example.com/base')).toBeUndefined();
    expect(problem(FORMAT.timeZone, 'UTC')).toBeUndefined();
  });
});
