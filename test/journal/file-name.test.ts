import { describe, expect, it } from 'vitest';
import { executionIdFromFileName, fileNameForExecution } from '../../src/journal/file-name.ts';

const UNSAFE_IDS = [
  'a/b',
  '..',
  '.',
  '../../etc/passwd',
  'with space',
  'héllo-€-日本',
  'a\\b',
  '%2F',
  'a.json',
  'x~y',
];

describe('fileNameForExecution', () => {
  it('keeps ids made of letters, digits, "_" and "-" as they are', () => {
    expect(fileNameForExecution('6650f1c2-aa_01')).toBe('6650f1c2-aa_01');
  });

  it('turns any other id into a name without separators or dots that maps back to the id', () => {
    for (const id of UNSAFE_IDS) {
      const name = fileNameForExecution(id);
      expect(name).toMatch(/^[A-Za-z0-9_%-]+$/);
      expect(executionIdFromFileName(name)).toBe(id);
    }
  });

  it('gives distinct ids distinct names, including ids that look like encodings', () => {
    const ids = [...UNSAFE_IDS, 'a%2Fb', 'a_2Fb', 'A', 'héllo', 'he\u0301llo'];
    expect(new Set(ids.map(fileNameForExecution)).size).toBe(ids.length);
  });

  it('shortens very long ids to a bounded name that stays distinct', () => {
    const long = 'é'.repeat(400);
    const names = [
      fileNameForExecution(long),
      fileNameForExecution(`${long}x`),
      fileNameForExecution(`${long}y`),
    ];
    for (const name of names) expect(name.length).toBeLessThanOrEqual(180);
    expect(new Set(names).size).toBe(3);
    expect(executionIdFromFileName(names[0]!)).toBeUndefined();
  });

  it('gives ids with different lone surrogates different names', () => {
    expect(fileNameForExecution('a\uD800')).not.toBe(fileNameForExecution('a\uD801'));
  });

  it('rejects an empty id', () => {
    expect(() => fileNameForExecution('')).toThrow(TypeError);
  });
});
