import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/telemetry/logger.ts';

const SECRET = 'sk-live-4f9c0d2e7a1b';

function capture() {
  const lines: Record<string, unknown>[] = [];
  const destination = {
    write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>),
  };
  return { lines, destination };
}

/** A destination that keeps the text written to it, looking like a terminal when `isTTY`. */
function captureText(isTTY = false) {
  let written = '';
  const destination = {
    isTTY,
    write: (chunk: string) => {
      written += chunk;
      return true;
    },
  };
  return { text: () => written, destination };
}

describe('createLogger', () => {
  it('writes JSON lines named df-worker with ISO timestamps', () => {
    const { lines, destination } = capture();
    createLogger({ level: 'info', destination }).info({ taskId: 't1' }, 'polled');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ name: 'df-worker', msg: 'polled', taskId: 't1', level: 30 });
    expect(lines[0]!.time).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
  });

  it('redacts the API key in a logged config, request headers and apiKey fields', () => {
    const { lines, destination } = capture();
    const logger = createLogger({ level: 'info', destination });
    logger.info({ config: { api: { key: SECRET, url: 'https://df.example.com' } } }, 'config');
    logger.info(
      { headers: { 'x-api-key': SECRET, authorization: `Bearer ${SECRET}`, accept: 'json' } },
      'req',
    );
    logger.info({ client: { apiKey: SECRET }, api: { key: SECRET }, http: { wakeToken: SECRET } }, 'other');
    expect(JSON.stringify(lines)).not.toContain(SECRET);
    expect(lines[0]).toMatchObject({ config: { api: { key: '[redacted]', url: 'https://df.example.com' } } });
    expect(lines[1]).toMatchObject({
      headers: { 'x-api-key': '[redacted]', authorization: '[redacted]', accept: 'json' },
    });
    expect(lines[2]).toMatchObject({ client: { apiKey: '[redacted]' }, api: { key: '[redacted]' } });
  });

  it('keeps fields merely named key, such as a task key', () => {
    const { lines, destination } = capture();
    createLogger({ level: 'info', destination }).info({ task: { key: 'resize-images' } }, 'task');
    expect(lines[0]).toMatchObject({ task: { key: 'resize-images' } });
  });

  it('serialises errors under err with type, message and stack', () => {
    const { lines, destination } = capture();
    createLogger({ level: 'info', destination }).error({ err: new TypeError('boom') }, 'failed');
    expect(lines[0]).toMatchObject({ err: { type: 'TypeError', message: 'boom' } });
    expect(String((lines[0]!.err as { stack: string }).stack)).toContain('TypeError: boom');
  });

  it('drops lines below the level', () => {
    const { lines, destination } = capture();
    const logger = createLogger({ level: 'warn', destination });
    logger.info('quiet');
    logger.warn('loud');
    expect(lines.map((line) => line.msg)).toEqual(['loud']);
  });

  it('writes readable lines when pretty is true, with the key still redacted and no JSON', () => {
    const { text, destination } = captureText();
    const logger = createLogger({ level: 'info', pretty: true, destination });
    logger.info({ taskKey: 'my-task', executionId: 'execution-1', apiKey: SECRET }, 'execution claimed');
    const [line] = text().split('\n');
    expect(line).toMatch(
      /^\[\d{2}:\d{2}:\d{2}\.\d{3}\] INFO: execution claimed {"taskKey":"my-task","executionId":"execution-1","apiKey":"\[redacted\]"}$/,
    );
    expect(text()).not.toContain(SECRET);
  });

  it.each([
    ['auto on a terminal', 'auto', true, true],
    ['auto on a pipe or file (a container)', 'auto', false, false],
    ['false on a terminal', false, true, false],
    ['true on a pipe', true, false, true],
  ] as const)('pretty %s: %s', (_, mode, isTTY, readable) => {
    const { text, destination } = captureText(isTTY);
    createLogger({ level: 'info', pretty: mode, destination }).info('hello');
    expect(text().startsWith('{')).toBe(!readable);
    expect(text()).toContain('hello');
  });
});
