// Failures the runner produces itself, and how any thrown value becomes the `error`/`errorName` pair of a
// FAILED report: message only (a stack trace would leak the worker's internals into the service), bounded in size.

export const MAX_ERROR_MESSAGE_LENGTH = 1000;

/** An attempt that ran past its time limit; also the reason `ctx.signal` aborts with. */
export class HandlerTimeoutError extends Error {
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

export interface ErrorSummary {
  message: string;
  errorName: string;
}

/** Reduces anything a handler threw to a short message and a name; accepts error-like objects from other realms. */
export function summariseError(error: unknown): ErrorSummary {
  if (
    typeof error === 'object' &&
    error !== null &&
    typeof (error as { message?: unknown }).message === 'string'
  ) {
    const { name, message, cause } = error as { name?: unknown; message: string; cause?: unknown };
    const errorName = typeof name === 'string' && name !== '' ? name : 'Error';
    let text = message === '' ? `${errorName} without a message` : message;
    // fetch's "fetch failed" says nothing by itself; the cause holds ECONNREFUSED and the like.
    const causeMessage = (cause as { message?: unknown } | null | undefined)?.message;
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

function describeThrown(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}
