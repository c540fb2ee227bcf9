// One marker and one scrubbing of secrets for the whole daemon: the logger, the configuration views, the
// service client and the runner all write the same `[redacted]`, and the key's URL-encoded form goes too.
import { describe, expect, it } from 'vitest';
import { REDACTED as CONFIG_REDACTED } from '../../src/config/index.ts';
import { REDACTED, redactor } from '../../src/errors/redact.ts';
import { redactor as runnerRedactor } from '../../src/runner/redact.ts';
import { REDACTED as LOGGER_REDACTED } from '../../src/telemetry/logger.ts';

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

  it('is the one marker the logger, the configuration view and the runner use', () => {
    expect(REDACTED).toBe('[redacted]');
    expect(LOGGER_REDACTED).toBe(REDACTED);
    expect(CONFIG_REDACTED).toBe(REDACTED);
    expect(runnerRedactor).toBe(redactor);
  });
});
