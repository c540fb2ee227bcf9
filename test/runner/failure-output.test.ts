// Every FAILED output df-worker builds carries `message`, as the service's jobs (and the official module) read
// it, and keeps its other keys.
import { describe, expect, it } from 'vitest';
import { withFailureMessage } from '../../src/runner/failure-output.ts';

describe('withFailureMessage', () => {
  it('takes the message from a string error and keeps every other key', () => {
    expect(withFailureMessage({ error: 'boom', errorName: 'Error', attempts: 3 })).toEqual({
      error: 'boom',
      errorName: 'Error',
      attempts: 3,
      message: 'boom',
    });
  });

  it("takes an error object's message, and keeps a message of the output's own", () => {
    expect(withFailureMessage({ error: { name: 'E', message: 'inner' } }).message).toBe('inner');
    expect(withFailureMessage({ error: 'x', message: 'own' })).toEqual({ error: 'x', message: 'own' });
  });

  it('falls back to a plain sentence when nothing says what failed', () => {
    expect(withFailureMessage({})).toEqual({ message: 'the task failed' });
    expect(withFailureMessage({ error: '', message: '' }).message).toBe('the task failed');
  });
});
