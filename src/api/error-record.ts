// The service client's errors as plain data and back, so a handler in a worker thread or child process gets
// the same class it would get in process (`instanceof PreconditionFailedError` holds on both sides).
import {
  NetworkError,
  PreconditionFailedError,
  ResponseValidationError,
  ServiceClientError,
  ServiceError,
  TimeoutError,
} from './errors.ts';
import type { ServiceErrorDetails, TimeoutPhase } from './errors.ts';
import type { Operation } from './types.ts';

/** What crosses the boundary for one error: its class and what its constructor needs, nothing else. */
export type ErrorRecord =
  | { kind: 'ServiceError' | 'PreconditionFailedError'; details: ServiceErrorDetails }
  | {
      kind: 'NetworkError' | 'TimeoutError';
      operation: Operation;
      message: string;
      sent: boolean;
      answerStatus?: number | undefined;
      phase?: TimeoutPhase;
    }
  | {
      kind: 'ResponseValidationError';
      operation: Operation;
      field: string;
      problem: string;
      executionId?: string | undefined;
    }
  /** Any other error: re-created as a ServiceClientError when it was one, else as a plain Error. */
  | { kind: 'other'; name: string; message: string; serviceClientError: boolean };

export function toErrorRecord(error: unknown): ErrorRecord {
  if (error instanceof ServiceError) {
    const { operation, status, code, retryAfterMs, serviceMessage, bodySnippet } = error;
    return {
      kind: error instanceof PreconditionFailedError ? 'PreconditionFailedError' : 'ServiceError',
      details: { operation, status, code, retryAfterMs, serviceMessage, bodySnippet },
    };
  }
  if (error instanceof NetworkError) {
    const { operation, message, sent, answerStatus } = error;
    if (error instanceof TimeoutError) {
      return { kind: 'TimeoutError', operation, message, sent, answerStatus, phase: error.phase };
    }
    return { kind: 'NetworkError', operation, message, sent, answerStatus };
  }
  if (error instanceof ResponseValidationError) {
    const { operation, field, problem, executionId } = error;
    return { kind: 'ResponseValidationError', operation, field, problem, executionId };
  }
  const isError = error instanceof Error;
  return {
    kind: 'other',
    name: isError ? error.name : 'Error',
    message: isError ? error.message : String(error),
    serviceClientError: error instanceof ServiceClientError,
  };
}

export function fromErrorRecord(record: ErrorRecord): Error {
  switch (record.kind) {
    case 'ServiceError':
      return new ServiceError(record.details);
    case 'PreconditionFailedError':
      return new PreconditionFailedError(record.details);
    case 'NetworkError':
    case 'TimeoutError': {
      const reach = { sent: record.sent, answerStatus: record.answerStatus };
      return record.kind === 'TimeoutError'
        ? new TimeoutError(record.operation, record.phase ?? 'request', record.message, undefined, reach)
        : new NetworkError(record.operation, record.message, undefined, reach);
    }
    case 'ResponseValidationError':
      return new ResponseValidationError(record.operation, record.field, record.problem, record.executionId);
    case 'other': {
      const error = record.serviceClientError
        ? new ServiceClientError(record.message)
        : new Error(record.message);
      error.name = record.name;
      return error;
    }
  }
}
