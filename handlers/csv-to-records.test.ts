// Tests for the csv-to-records example, run through runTaskLocally as the daemon would run it.
import { describe, expect, it } from 'vitest';
import { runTaskLocally } from 'df-worker';
import csvToRecords from './csv-to-records.ts';

describe('csv-to-records', () => {
  it('turns each row into a record keyed by the header', async () => {
    const outcome = await runTaskLocally(csvToRecords, { csv: 'sku,qty\nA1,3\nB2,5\n' });
    expect(outcome).toMatchObject({
      status: 'COMPLETED',
      output: {
        columns: ['sku', 'qty'],
        rowCount: 2,
        records: [
          { sku: 'A1', qty: '3' },
          { sku: 'B2', qty: '5' },
        ],
      },
    });
  });

  it('reads quoted fields holding delimiters, doubled quotes and line breaks (RFC 4180)', async () => {
    const csv = 'name,note\r\n"Smith, Jane","said ""hi""\r\nthen left"\r\n"",plain\r\n';
    const outcome = await runTaskLocally(csvToRecords, { csv });
    expect(outcome.output.records).toEqual([
      { name: 'Smith, Jane', note: 'said "hi"\r\nthen left' },
      { name: '', note: 'plain' },
    ]);
  });

  it('accepts another delimiter, a byte order mark and blank lines', async () => {
    const csv = '\uFEFFa;b\n\n1;2\n\n';
    const outcome = await runTaskLocally(csvToRecords, { csv, delimiter: ';' });
    expect(outcome.output).toEqual({ columns: ['a', 'b'], rowCount: 1, records: [{ a: '1', b: '2' }] });
  });

  it('gives no records for a header-only CSV', async () => {
    const outcome = await runTaskLocally(csvToRecords, { csv: 'a\tb', delimiter: '\t' });
    expect(outcome.output).toEqual({ columns: ['a', 'b'], rowCount: 0, records: [] });
  });

  it('fails without retrying on an unterminated quote, naming the line it opens on', async () => {
    const csv = 'id,comment\n1,fine\n2,"never closed\n3,more\n';
    const outcome = await runTaskLocally(csvToRecords, { csv }, { retryCount: 2 });
    expect(outcome).toMatchObject({
      status: 'FAILED',
      attempts: 1,
      output: {
        error: 'line 3: quoted field is never closed; add the closing quote (")',
        errorName: 'NonRetryableError',
      },
    });
  });

  it.each([
    [
      'a row with too many fields',
      'a,b\n1,2\n3,4,5\n',
      'line 3: expected 2 fields as in the header row, got 3',
    ],
    ['text after a closing quote', 'a,b\n"x"y,2\n', 'line 2: unexpected character after a closing quote'],
    ['a duplicate column', 'a,a\n1,2\n', 'line 1: duplicate column name "a"'],
    ['an empty input', '', 'input "csv" is empty; expected a header row'],
  ])('fails without retrying on %s', async (_name, csv, message) => {
    const outcome = await runTaskLocally(csvToRecords, { csv });
    expect(outcome).toMatchObject({
      status: 'FAILED',
      attempts: 1,
      output: { errorName: 'NonRetryableError' },
    });
    expect(outcome.output.error).toContain(message);
  });

  it('rejects a delimiter longer than one character', async () => {
    const outcome = await runTaskLocally(csvToRecords, { csv: 'a', delimiter: '||' });
    expect(outcome.output.error).toMatch(/^input "delimiter" must be a single character/);
  });
});
