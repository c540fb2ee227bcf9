import { describe, expect, it } from 'vitest';
import { layerValues } from '../../src/config/layers.ts';

describe('layerValues', () => {
  it('starts from the defaults, merges files in order, puts the environment above them and options above all', () => {
    const { values, problems } = layerValues(
      [{ concurrency: 2, log: { level: 'warn' } }, { concurrency: 3 }],
      { DF_LOG_LEVEL: 'error', DF_BUDGET_PER_MINUTE: '40' },
      { 'budget.perMinute': 30 },
    );
    expect(problems).toEqual([]);
    expect(values).toMatchObject({
      concurrency: 3,
      log: { level: 'error', pretty: 'auto' },
      budget: { perMinute: 30, perSecond: 5 },
    });
  });

  it('coerces text by the setting format, wherever it comes from, and leaves text that spells nothing', () => {
    const { values } = layerValues(
      [{ concurrency: ' 5 ', log: { pretty: 'yes' } }],
      { DF_BUDGET_PER_MINUTE: '12abc' },
      { 'http.port': '9000' },
    );
    expect(values).toMatchObject({
      concurrency: 5,
      log: { pretty: true },
      budget: { perMinute: '12abc' },
      http: { port: 9000 },
    });
  });

  it('names an option that has nowhere to go, and keeps what a file gave a group for the checks to report', () => {
    const { values, problems } = layerValues(
      [{ log: 'debug' }],
      { DF_LOG_LEVEL: 'info' },
      { 'concurrency.max': 3 },
    );
    expect(problems).toEqual([
      {
        setting: 'concurrency.max',
        message: 'is not a setting df-worker knows (from the command-line options)',
      },
    ]);
    expect(values.log).toBe('debug');
  });

  it('never writes to Object.prototype', () => {
    layerValues(
      [JSON.parse('{"__proto__": {"polluted": 1}}') as Record<string, unknown>],
      {},
      { '__proto__.polluted': 1 },
    );
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });
});
