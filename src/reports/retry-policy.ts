// How the daemon reacts to a failed request to the service: one decision table shared by polls and reports.
import { NetworkError, ServiceError } from '../api/errors.ts';

export type FailureAction =
  /**
   * 429: retry the same request at once. The budget heard the answer through the client's gate and paused every
   * request (the whole key is over a limit), so the retry waits for the pause in its acquire.
   */
  | { kind: 'rate-limited' }
  /** 5xx, 408, network error, timeout: retry this request after a back-off. */
  | { kind: 'transient' }
  /** 401: the key is not accepted; stop polling, mark not ready, retry slowly. */
  | { kind: 'unauthorized' }
  /** Any other answer (400, 403, 404, 409...): the same request will not succeed. */
  | { kind: 'permanent' };

export function classifyFailure(error: unknown): FailureAction {
  if (error instanceof ServiceError) {
    if (error.status === 429) return { kind: 'rate-limited' };
    if (error.status === 401) return { kind: 'unauthorized' };
    if (error.retryable) return { kind: 'transient' };
    return { kind: 'permanent' };
  }
  if (error instanceof NetworkError) return { kind: 'transient' };
  return { kind: 'permanent' };
}
