// What handler code is given of the daemon's environment, and how secrets are cleaned out of what it produces.
import { describe, expect, it } from 'vitest';
import { redactDeep, redactor } from '../../src/secrets/redact.ts';
import { handlerEnvironment, SECRET_VARIABLES } from '../../src/config/secret-settings.ts';

const KEY = 'sk-live-0123456789abcdef';

describe('handlerEnvironment', () => {
  it("leaves out the daemon's secret variables and any variable holding a secret, and keeps the rest", () => {
    const env = handlerEnvironment(
      {
        PATH: '/usr/bin',
        DF_API_KEY: KEY,
        DF_API_KEY_FILE: '/run/secrets/key',
        DF_HTTP_WAKE_TOKEN: 'wake-token-1234',
        DF_CONFIG: '/etc/df-worker.json',
        MY_COPY: `Bearer ${KEY}`,
        ERP_TOKEN: 'the handler may keep its own',
        DF_LOG_LEVEL: 'info',
      },
      [KEY, 'wake-token-1234'],
    );
    expect(env).toEqual({
      PATH: '/usr/bin',
      ERP_TOKEN: 'the handler may keep its own',
      DF_LOG_LEVEL: 'info',
    });
  });

  it('names every sensitive setting of the schema among the variables left out', () => {
    expect(SECRET_VARIABLES).toEqual(
      expect.arrayContaining(['DF_API_KEY', 'DF_HTTP_WAKE_TOKEN', 'DF_API_KEY_FILE', 'DF_CONFIG']),
    );
  });
});

describe('redactDeep', () => {
  it('replaces a secret in every string of a value, object keys included, and keeps "__proto__" a member', () => {
    const redact = redactor([KEY]);
    const value = JSON.parse(
      `{"a": "x ${KEY} y", "list": [1, "${KEY}", {"deep": "${KEY}${KEY}"}], "${KEY}": true, "__proto__": "${KEY}"}`,
    ) as Record<string, unknown>;
    const cleaned = redactDeep(value, redact);
    expect(JSON.stringify(cleaned)).not.toContain(KEY);
    expect(cleaned).toEqual(
      JSON.parse(
        '{"a": "x [redacted] y", "list": [1, "[redacted]", {"deep": "[redacted][redacted]"}], "[redacted]": true, "__proto__": "[redacted]"}',
      ),
    );
    expect(Object.hasOwn(cleaned, '__proto__')).toBe(true);
  });

  it('changes nothing without secrets', () => {
    const value = { a: 'text' };
    expect(redactDeep(value, redactor([]))).toEqual(value);
  });
});
