// Example handler: parses CSV text (RFC 4180: quoted fields may hold delimiters, doubled quotes and line breaks)
// into one record per row keyed by the header row. Malformed CSV fails at once, naming the line to fix.
import { defineTask, NonRetryableError } from 'df-worker';

type Input = { csv: unknown; delimiter?: unknown };
type Output = { records: Array<Record<string, string>>; rowCount: number; columns: string[] };

export default defineTask<Input, Output>({
  key: 'csv-to-records',
  description: 'Parses CSV with a header row into an array of records',
  inputKeys: [{ key: 'csv', description: 'CSV text whose first row names the columns' }],
  outputKeys: [
    { key: 'records', description: 'One object per data row, column name to text value' },
    { key: 'rowCount', description: 'Number of data rows (header excluded)' },
    { key: 'columns', description: 'Column names in header order' },
  ],
  handle(input) {
    if (typeof input.csv !== 'string')
      throw new NonRetryableError('input "csv" must be a string of CSV text');
    const delimiter = parseDelimiter(input.delimiter);
    const [header, ...rows] = parseCsv(input.csv, delimiter);
    if (header === undefined) throw new NonRetryableError('input "csv" is empty; expected a header row');

    const columns = header.fields;
    const seen = new Set<string>();
    for (const column of columns) {
      if (seen.has(column))
        throw new NonRetryableError(`line ${header.line}: duplicate column name "${column}"`);
      seen.add(column);
    }
    const records = rows.map((row) => {
      if (row.fields.length !== columns.length) {
        throw new NonRetryableError(
          `line ${row.line}: expected ${columns.length} fields as in the header row, got ${row.fields.length}`,
        );
      }
      return Object.fromEntries(columns.map((column, index) => [column, row.fields[index] ?? '']));
    });
    return { records, rowCount: records.length, columns };
  },
});

/** The `delimiter` input: one character, default ",". */
function parseDelimiter(value: unknown): string {
  if (value === undefined || value === null || value === '') return ',';
  if (typeof value !== 'string' || value.length !== 1 || value === '"' || value === '\r' || value === '\n') {
    throw new NonRetryableError(
      'input "delimiter" must be a single character other than a quote or line break',
    );
  }
  return value;
}

interface Row {
  /** 1-based line on which the row starts (quoted line breaks make rows span lines). */
  line: number;
  fields: string[];
}

/** Splits CSV text into rows of fields; blank lines are skipped, CRLF and LF both end a row. */
function parseCsv(text: string, delimiter: string): Row[] {
  const rows: Row[] = [];
  const source = text.startsWith('\uFEFF') ? text.slice(1) : text;
  let line = 1;
  let row: Row = { line, fields: [] };
  let field = '';
  let atFieldStart = true; // only there does a quote open a quoted field
  let rowHasContent = false; // tells a blank line from a row holding one empty quoted field

  const endField = () => {
    row.fields.push(field);
    field = '';
    atFieldStart = true;
  };
  const endRow = () => {
    if (rowHasContent) {
      endField();
      rows.push(row);
    }
    row = { line, fields: [] };
    field = '';
    atFieldStart = true;
    rowHasContent = false;
  };

  let i = 0;
  while (i < source.length) {
    const char = source[i];
    if (char === '"' && atFieldStart) {
      const quoteLine = line;
      i++;
      for (;;) {
        if (i >= source.length) {
          throw new NonRetryableError(
            `line ${quoteLine}: quoted field is never closed; add the closing quote (")`,
          );
        }
        const quoted = source[i];
        i++;
        if (quoted === '"') {
          if (source[i] !== '"') break;
          i++; // a doubled quote stands for one quote
        } else if (quoted === '\n') {
          line++;
        }
        field += quoted;
      }
      atFieldStart = false;
      rowHasContent = true;
      const next = source[i];
      if (next !== undefined && next !== delimiter && next !== '\n' && next !== '\r') {
        throw new NonRetryableError(
          `line ${line}: unexpected character after a closing quote; write a quote inside a quoted field as ""`,
        );
      }
      continue;
    }
    if (char === delimiter) {
      endField();
      rowHasContent = true;
    } else if (char === '\n' || char === '\r') {
      if (char === '\r' && source[i + 1] === '\n') i++;
      line++;
      endRow();
    } else {
      field += char;
      atFieldStart = false;
      rowHasContent = true;
    }
    i++;
  }
  endRow();
  return rows;
}
