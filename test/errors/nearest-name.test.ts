// "Did you mean ...?": the edit distance that counts a swap as one typo, and when a name is close enough.
import { describe, expect, it } from 'vitest';
import { editDistance, nearestName } from '../../src/errors/nearest-name.ts';

describe('editDistance', () => {
  it('counts an insertion, a deletion, a substitution and a swap of neighbours as one typo each', () => {
    expect(editDistance('DF_API_KEY', 'DF_API_KEY')).toBe(0);
    expect(editDistance('DF_HANDLER_TIMOUT_MS', 'DF_HANDLER_TIMEOUT_MS')).toBe(1);
    expect(editDistance('DF_CONCURRENCYY', 'DF_CONCURRENCY')).toBe(1);
    expect(editDistance('DF_API_URI', 'DF_API_URL')).toBe(1);
    expect(editDistance('DF_API_KYE', 'DF_API_KEY')).toBe(1);
    expect(editDistance('my-tsak', 'my-task')).toBe(1);
    expect(editDistance('', 'abc')).toBe(3);
    expect(editDistance('kitten', 'sitting')).toBe(3);
  });
});

describe('nearestName', () => {
  const settings = ['DF_API_URL', 'DF_API_KEY', 'DF_API_KEY_FILE', 'DF_HANDLER_TIMEOUT_MS', 'DF_CONCURRENCY'];

  it('suggests the known name a typo was meant to be, whatever its case', () => {
    expect(nearestName('DF_API_KYE', settings)).toBe('DF_API_KEY');
    expect(nearestName('DF_HANDLER_TIMOUT_MS', settings)).toBe('DF_HANDLER_TIMEOUT_MS');
    expect(nearestName('df_concurrency', settings)).toBe('DF_CONCURRENCY');
    expect(nearestName('my-tsak', ['other', 'my-task'])).toBe('my-task');
  });

  it('suggests nothing when no known name is within a few typos, or the name is itself known', () => {
    expect(nearestName('DF_FEATURE_FLAGS', settings)).toBeUndefined();
    expect(nearestName('DF_API_KEY', settings)).toBeUndefined();
    expect(nearestName('my-job', ['my-task'])).toBeUndefined();
    expect(nearestName('anything', [])).toBeUndefined();
  });

  it('allows one typo in a short name, so that a different short key is not taken for one', () => {
    expect(nearestName('ab-cd', ['ab-ef'])).toBeUndefined();
    expect(nearestName('ab-cd', ['ab-ce'])).toBe('ab-ce');
  });
});
