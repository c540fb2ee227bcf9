// What the parts under the core tell of the service and its key (a request's answer, a 429's pause, a read of
// DF_API_KEY_FILE), as payloads of their events: kept here, below the client, the budget and the secrets, so
// those parts emit on the emitter while importing downward.
import type { Operation } from './operations.ts';

/**
 * One per request sent, for metrics and traces. Carries no query string, header or body, so it can never leak
 * the API key (which travels in a header, or in the query string with authMode 'query').
 */
export interface ResponseEvent {
  operation: Operation;
  method: string;
  /** Scheme, host, port and path of the request: no query string, no credentials. */
  url: string;
  /** When the request left the budget gate, in epoch ms. */
  startedAt: number;
  /** HTTP status, or 0 when no answer came (network error, timeout, caller's abort). */
  status: number;
  /** From sending (after the gate) to the body fully read or the failure, in milliseconds. */
  durationMs: number;
  /**
   * The error the call threw, when it was a ServiceClientError (api/errors.ts); absent on success and on a
   * caller's abort.
   */
  error?: Error;
}

/** A pause of every request after a 429: what the service asked, and what the budget took. */
export interface RateLimitPause {
  operation: Operation;
  /** From the answer's Retry-After, in ms; undefined when it had none (or none readable). */
  retryAfterMs: number | undefined;
  /** The pause taken, in ms: Retry-After (or the default pause) capped at `retryAfterMaxMs`. */
  pauseMs: number;
  /** Monotonic instant the pause ends (a wall-clock step neither lengthens nor ends it). */
  until: number;
}

/** How a read of DF_API_KEY_FILE ended: a new key taken, the same key, or no key found (the one in use kept). */
export type KeyFileReadResult = 'changed' | 'unchanged' | 'unreadable';

/** One read of DF_API_KEY_FILE that was not for nothing: the key changed, or the file held no usable key. */
export interface KeyFileRead {
  result: KeyFileReadResult;
  /** What made it read: its folder's watch, the periodic stat, or the service refusing the key (401). */
  trigger: 'watch' | 'stat' | 'refused';
  /** Why no key was taken (`unreadable`): the file's error code, or what is wrong with what it holds. */
  problem?: string;
}
