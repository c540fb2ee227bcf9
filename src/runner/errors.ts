// Failures the runner produces itself, and how any thrown value becomes the `error`/`errorName` pair of a
// FAILED report: message only (a stack trace would leak the worker's internals into the service), bounded in size.
import type { ErrorCode } from '../errors/catalogue.ts';

export const MAX_ERROR_MESSAGE_LENGTH = 1000;

/** An attempt that ran past its time limit; also the reason `ctx.signal` aborts with. */
export class HandlerTimeoutError extends Error {
  readonly code: ErrorCode = 'DFW_HANDLER_TIMEOUT';
  readonly timeoutMs: number;

  constructor(taskKey: string, timeoutMs: number) {
    super(
      `handler for task "${taskKey}" did not finish within ${timeoutMs} ms; make it faster, raise its timeoutMs, ` +
        'or pass ctx.signal to the work it waits on so it stops in time',
    );
    this.name = 'HandlerTimeoutError';
    this.timeoutMs = timeoutMs;
  }
}

/** What ran the handler died during the attempt (see HostResult 'crashed'). */
export class HandlerCrashError extends Error {
  readonly code: ErrorCode = 'DFW_HANDLER_CRASH';

  constructor(message: string) {
    super(message);
    this.name = 'HandlerCrashError';
  }
}

export interface ErrorSummary {
  message: string;
  errorName: string;
}

/**
 * Reduces anything a handler threw to a short message and a name; accepts error-like objects from other realms.
 * Total: a getter or proxy trap that throws while the value is read, a cycle or a null prototype never makes it
 * throw in turn.
 */
export function summariseError(error: unknown): ErrorSummary {
  const message = readMember(error, 'message');
  if (typeof message === 'string') {
    const name = readMember(error, 'name');
    const errorName = typeof name === 'string' && name !== '' ? name : 'Error';
    let text = message === '' ? `${errorName} without a message` : message;
    // fetch's "fetch failed" says nothing by itself; the cause holds ECONNREFUSED and the like.
    const causeMessage = readMember(readMember(error, 'cause'), 'message');
    if (typeof causeMessage === 'string' && causeMessage !== '') text += ` (cause: ${causeMessage})`;
    return { message: truncateMessage(text), errorName };
  }
  return {
    message: truncateMessage(`handler threw a non-Error value: ${describeThrown(error)}`),
    errorName: 'NonErrorThrown',
  };
}

export function truncateMessage(text: string, max = MAX_ERROR_MESSAGE_LENGTH): string {
  if (text.length <= max) return text;
  const marker = '… (truncated)';
  return text.slice(0, max - marker.length) + marker;
}

/** Readable text for any thrown value; each step falls back to a cruder one when reading the value throws. */
function describeThrown(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  try {
    const json = JSON.stringify(value) as string | undefined;
    if (json !== undefined) return json;
  } catch {
    // A cycle, a bigint, a throwing toJSON or getter: try plainer renderings below.
  }
  try {
    return String(value);
  } catch {
    // A null-prototype object has no toString; a proxy trap or toPrimitive may throw.
  }
  try {
    return Object.prototype.toString.call(value);
  } catch {
    return 'a value that cannot be read (its getters or proxy traps throw)';
  }
}

/** `value[key]` for objects, or undefined when it is not an object or reading the member throws. */
function readMember(value: unknown, key: string): unknown {
  if (typeof value !== 'object' || value === null) return undefined;
  try {
    return (value as Record<string, unknown>)[key];
  } catch {
    return undefined;
  }
}
