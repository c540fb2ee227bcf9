// JSON input given on the command line: `run --input` (JSON text or `@file`, read into one JSON object), and
// where JSON text goes wrong (line, column, position), which `dev --enqueue` quotes too.
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { JsonObject } from '../../api/types.ts';
import type { ErrorCode } from '../../errors/catalogue.ts';
import { isPlainObject } from '../../schema/plain-object.ts';

/** The --input argument is unusable: unreadable file, not JSON, or not a JSON object. */
export class InputError extends Error {
  readonly code: ErrorCode = 'DFW_CLI_INPUT_INVALID';

  constructor(message: string) {
    super(message);
    this.name = 'InputError';
  }
}

/** The input object from `--input`: JSON text, or `@file` holding it (relative to `cwd`). */
export async function readInputArgument(argument: string, cwd: string): Promise<JsonObject> {
  let text = argument;
  let source = '--input';
  if (argument.startsWith('@')) {
    const file = path.resolve(cwd, argument.slice(1));
    source = `the --input file ${file}`;
    try {
      text = await readFile(file, 'utf8');
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? String(error);
      throw new InputError(`cannot read ${source} (${code === 'ENOENT' ? 'it does not exist' : code})`);
    }
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new InputError(`${source} is not valid JSON: ${describeJsonError(text)}`);
  }
  if (!isPlainObject(value)) {
    const got = value === null ? 'null' : Array.isArray(value) ? 'an array' : `a ${typeof value}`;
    throw new InputError(`${source} must be a JSON object such as {"text": "hello"}, got ${got}`);
  }
  return value;
}

/** Where JSON text goes wrong, as "unexpected X at line L, column C (position P)". */
export function describeJsonError(text: string): string {
  const offset = jsonErrorOffset(text) ?? 0;
  const before = text.slice(0, offset);
  const line = before.split('\n').length;
  const column = offset - (before.lastIndexOf('\n') + 1) + 1;
  const found = offset >= text.length ? 'end of input' : JSON.stringify(text[offset]);
  return `unexpected ${found} at line ${line}, column ${column} (position ${offset})`;
}

/**
 * Offset of the first character at which `text` stops being JSON (its length when it ends too early), or
 * undefined when it is valid. V8's own message gives no position for an unexpected token, and quotes the text.
 */
export function jsonErrorOffset(text: string): number | undefined {
  let i = 0;
  const stop = (): never => {
    throw new JsonStop(i);
  };
  const space = () => {
    while (i < text.length && ' \t\n\r'.includes(text[i]!)) i++;
  };
  const expect = (char: string) => {
    if (text[i] !== char) stop();
    i++;
  };
  const string = () => {
    expect('"');
    for (;;) {
      const char = text[i];
      if (char === undefined || char < ' ') stop();
      if (char === '"') {
        i++;
        return;
      }
      if (char !== '\\') {
        i++;
        continue;
      }
      i++;
      if (text[i] === 'u') {
        for (let digit = 0; digit < 4; digit++) {
          i++;
          if (!/[0-9a-fA-F]/.test(text[i] ?? '')) stop();
        }
      } else if (!'"\\/bfnrt'.includes(text[i] ?? 'x')) {
        stop();
      }
      i++;
    }
  };
  const sequence = (close: string, member: () => void) => {
    i++;
    space();
    if (text[i] === close) {
      i++;
      return;
    }
    for (;;) {
      member();
      space();
      if (text[i] === close) {
        i++;
        return;
      }
      expect(',');
      space();
    }
  };
  const value = (): void => {
    space();
    const char = text[i];
    if (char === '{') {
      return sequence('}', () => {
        string();
        space();
        expect(':');
        value();
      });
    }
    if (char === '[') return sequence(']', value);
    if (char === '"') return string();
    const number = /-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/y;
    number.lastIndex = i;
    if (number.test(text)) {
      i = number.lastIndex;
      return;
    }
    const literal = ['true', 'false', 'null'].find((word) => word[0] === char);
    if (literal === undefined) stop();
    for (const expected of literal!) expect(expected);
  };
  try {
    value();
    space();
    if (i < text.length) stop();
    return undefined;
  } catch (error) {
    if (error instanceof JsonStop) return error.offset;
    throw error;
  }
}

/** Unwinds the JSON scan at the first bad character; never escapes jsonErrorOffset. */
class JsonStop extends Error {
  readonly offset: number;
  constructor(offset: number) {
    super(`JSON stops being valid at position ${offset}`);
    this.offset = offset;
  }
}
