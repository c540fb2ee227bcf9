// One marker and one scrubbing of secrets for the whole daemon: the logger, the configuration views, URLs in
// messages, the service client and the runner all write the same `[redacted]`, and the key's URL-encoded form
// goes too. The marker is written in src/secrets/redact.ts alone.
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.ts';
import { redactedConfig } from '../../src/config/describe.ts';
import { REDACTED, redactor, redactUrl } from '../../src/secrets/redact.ts';
import { createLogger } from '../../src/telemetry/logger.ts';
import { REPO_ROOT } from '../cli/run-cli.ts';

describe('redactor', () => {
  it('replaces a secret raw and URL-encoded, wherever it occurs', () => {
    const key = 'k3y/with+special=chars';
    const redact = redactor([key]);
    const echoed = `GET /v1/tasks?api_key=${encodeURIComponent(key)} failed; header was ${key}`;
    expect(redact(echoed)).toBe(`GET /v1/tasks?api_key=${REDACTED} failed; header was ${REDACTED}`);
    expect(redact(echoed)).not.toContain('k3y');
  });

  it('ignores empty secrets and leaves text without one as it is', () => {
    expect(redactor(['', 'token'])('a token and another token')).toBe(
      `a ${REDACTED} and another ${REDACTED}`,
    );
    expect(redactor([''])('nothing to hide')).toBe('nothing to hide');
  });

  it('is the one marker the logger, the configuration view and URLs show', () => {
    expect(REDACTED).toBe('[redacted]');
    const chunks: string[] = [];
    const destination = new Writable({
      write(chunk: Buffer, _encoding, done) {
        chunks.push(chunk.toString());
        done();
      },
    });
    createLogger({ level: 'info', destination }).info({ apiKey: 'secret-key-1' }, 'line');
    expect((JSON.parse(chunks.join('')) as { apiKey: unknown }).apiKey).toBe(REDACTED);
    const config = loadConfig({ env: { DF_API_URL: 'https://h.example', DF_API_KEY: 'secret-key-1' } });
    expect(redactedConfig(config)).toMatchObject({ api: { key: REDACTED } });
    expect(redactUrl('https://user:pw@h.example/v1?api_key=k#f')).toBe(
      `https://${REDACTED}@h.example/v1?${REDACTED}#${REDACTED}`,
    );
    expect(redactUrl('user:pw@h.example/?k')).toBe(`${REDACTED}@h.example/?${REDACTED}`);
  });

  it('is written out nowhere else in src/: no second marker such as `***`', async () => {
    const dir = path.join(REPO_ROOT, 'src');
    const entries = await readdir(dir, { withFileTypes: true, recursive: true });
    const strays: string[] = [];
    for (const entry of entries.filter((e) => e.isFile() && e.name.endsWith('.ts'))) {
      const file = path.join(entry.parentPath, entry.name);
      if (file === path.join(dir, 'secrets', 'redact.ts')) continue;
      const text = await readFile(file, 'utf8');
      for (const [index, line] of text.split('\n').entries()) {
        if (/\[redacted\]'|'\[redacted|\*\*\*['`]|['`]\*\*\*/.test(line)) {
          strays.push(`${path.relative(REPO_ROOT, file)}:${index + 1}: ${line.trim()}`);
        }
      }
    }
    expect(strays).toEqual([]);
  });
});
