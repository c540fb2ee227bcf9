// `ctx.service`: the service client a handler gets. Its calls go through the daemon's one ServiceClient (the
// budget's 'handler' class, the 429 handling, the key) whether the handler runs in process or in a worker: a
// call is plain data (operation and arguments) that the daemon's side performs with `performServiceCall`.
import { checkUploadSize } from '../api/file-limits.ts';
import { fromErrorRecord, type ErrorRecord } from '../api/error-record.ts';
import { ServiceClientError } from '../api/errors.ts';
import type { ServiceClient } from '../api/client.ts';
import type { ErrorCode } from '../errors/catalogue.ts';
import { isPlainObject } from '../schema/plain-object.ts';
import type {
  JobExecution,
  JsonObject,
  ServiceFile,
  TaskExecution,
  VariableUpdate,
  VersionedVariable,
} from '../api/types.ts';

/** A file a handler uploads: bytes, text (sent as UTF-8) or a Blob. */
export interface HandlerFile {
  name: string;
  data: Uint8Array | string | Blob;
  /** Default: the Blob's type, `text/plain; charset=utf-8` for text, else `application/octet-stream`. */
  contentType?: string;
}

/**
 * The service as a handler sees it. Every call waits its turn in the daemon's request budget (after reports,
 * before idle polls) and is cancelled with the attempt (`ctx.signal`); after the attempt ended it is refused
 * with ServiceCallRefusedError. Failures are the service client's errors: ServiceError (with `status`),
 * PreconditionFailedError for a stale `ifMatch`, NetworkError, TimeoutError.
 */
export interface TaskServiceClient {
  files: {
    /**
     * Uploads a file to the v2 files API (multipart); resolves the file record (its `id`). A file over the
     * service's 100 MB is refused with UploadTooLargeError (`DFW_API_UPLOAD_TOO_LARGE`) before it is sent. The
     * service deletes uploaded files after 90 days: a job must consume the file before then.
     */
    upload(file: HandlerFile): Promise<ServiceFile>;
    get(id: string): Promise<ServiceFile>;
  };
  executions: {
    /** A task execution by id, e.g. the one being run: `ctx.execution.id`. */
    get(id: string): Promise<TaskExecution>;
  };
  variables: {
    /** The variable and its version (`etag`), for an update that must not overwrite someone else's. */
    get(id: string): Promise<VersionedVariable>;
    /** With `ifMatch`, rejects with PreconditionFailedError (nothing changed) when the version moved on. */
    update(id: string, update: VariableUpdate, options?: { ifMatch?: string }): Promise<VersionedVariable>;
  };
  jobExecutions: {
    get(id: string): Promise<JobExecution>;
    /** Starts a job execution; the body's members are the service's (not documented in its API description). */
    create(body: JsonObject): Promise<JobExecution>;
  };
}

export type HandlerOperation =
  | 'files.upload'
  | 'files.get'
  | 'executions.get'
  | 'variables.get'
  | 'variables.update'
  | 'jobExecutions.get'
  | 'jobExecutions.create';

/** One call as it crosses to the daemon: bodies as Uint8Array, everything else JSON-like. */
export interface ServiceCall {
  operation: HandlerOperation;
  args: unknown[];
}

/** A `ctx.service` call that was not sent: its attempt had ended, it was aborted, or no service is set up. */
export class ServiceCallRefusedError extends ServiceClientError {
  override name = 'ServiceCallRefusedError';
  override readonly code: ErrorCode = 'DFW_SERVICE_CALL_REFUSED';
}

/** The error a call's answer carries, re-created on the handler's side as the class it was thrown as. */
export function serviceCallError(record: ErrorRecord): Error {
  if (record.kind === 'other' && record.name === 'ServiceCallRefusedError') {
    return new ServiceCallRefusedError(record.message);
  }
  return fromErrorRecord(record);
}

/**
 * Builds `ctx.service` over `invoke`, which carries a call to the daemon's side. `refusal` says why a call
 * may not go now (attempt ended, signal aborted), or undefined when it may.
 */
export function createTaskService(
  invoke: (call: ServiceCall) => Promise<unknown>,
  refusal: () => string | undefined,
): TaskServiceClient {
  const call = async <T>(operation: HandlerOperation, args: unknown[]): Promise<T> => {
    const reason = refusal();
    if (reason !== undefined) {
      throw new ServiceCallRefusedError(`ctx.service ${operation} was not sent: ${reason}`);
    }
    return (await invoke({ operation, args })) as T;
  };
  return {
    files: {
      upload: async (file) => {
        const wire = await toWireFile(file);
        // Refused here, in the handler's thread, rather than after 100 MB crossed to the daemon's.
        checkUploadSize(wire.name, wire.data.byteLength);
        return await call('files.upload', [wire]);
      },
      get: (id) => call('files.get', [id]),
    },
    executions: { get: (id) => call('executions.get', [id]) },
    variables: {
      get: (id) => call('variables.get', [id]),
      update: (id, update, options = {}) => call('variables.update', [id, update, options]),
    },
    jobExecutions: {
      get: (id) => call('jobExecutions.get', [id]),
      create: (body) => call('jobExecutions.create', [body]),
    },
  };
}

/** Why a `ctx.service` call may not go now: its attempt ended or was aborted; undefined when it may. */
export function attemptRefusal(executionId: string, ended: boolean, signal: AbortSignal): string | undefined {
  if (ended) {
    return (
      `the attempt on execution ${executionId} has ended; ` +
      'await every ctx.service call before the handler returns or throws'
    );
  }
  if (signal.aborted) {
    const reason = signal.reason instanceof Error ? signal.reason.message : 'it was aborted';
    return `the attempt on execution ${executionId} was aborted (${reason}); ctx.signal says when to stop`;
  }
  return undefined;
}

/** `ctx.service` where no service is set up (runTaskLocally without `service`): every call is refused. */
export const unavailableTaskService: TaskServiceClient = createTaskService(
  () => Promise.reject(new Error('unreachable')),
  () =>
    'no service is set up for this run; pass `service` (a ServiceClient, e.g. on the Emulator) to ' +
    'runTaskLocally, or run the handler in df-worker',
);

async function toWireFile(
  file: HandlerFile,
): Promise<{ name: string; data: Uint8Array; contentType?: string }> {
  const { name, data } = file;
  let bytes: Uint8Array;
  let contentType = file.contentType;
  if (typeof data === 'string') {
    bytes = new TextEncoder().encode(data);
    contentType ??= 'text/plain; charset=utf-8';
  } else if (data instanceof Blob) {
    bytes = new Uint8Array(await data.arrayBuffer());
    if (data.type !== '') contentType ??= data.type;
  } else {
    bytes = data;
  }
  return contentType === undefined ? { name, data: bytes } : { name, data: bytes, contentType };
}

/**
 * Performs one call on the daemon's side with the handlers' client, cancelled by the attempt's `signal`. The
 * arguments come from handler code (maybe across a boundary): each is checked before anything is sent.
 */
export async function performServiceCall(
  client: ServiceClient,
  call: ServiceCall,
  signal: AbortSignal,
): Promise<unknown> {
  const { operation, args } = call;
  const id = () => idArgument(operation, args[0]);
  switch (operation) {
    case 'files.upload':
      return await client.uploadFile(fileArgument(args[0]), signal);
    case 'files.get':
      return await client.getFile(id(), signal);
    case 'executions.get':
      return await client.getExecution(id(), signal);
    case 'variables.get':
      return await client.getVariable(id(), signal);
    case 'variables.update': {
      const update = args[1];
      if (!isPlainObject(update)) throw refusedArgument(operation, 'the update must be an object');
      const options = isPlainObject(args[2]) ? args[2] : {};
      const ifMatch = options.ifMatch;
      if (ifMatch !== undefined && typeof ifMatch !== 'string') {
        throw refusedArgument(operation, 'ifMatch must be the ETag string a get returned');
      }
      return await client.updateVariable(id(), update as unknown as VariableUpdate, {
        signal,
        ...(ifMatch === undefined ? {} : { ifMatch }),
      });
    }
    case 'jobExecutions.get':
      return await client.getJobExecution(id(), signal);
    case 'jobExecutions.create':
      if (!isPlainObject(args[0])) throw refusedArgument(operation, 'the body must be a plain object');
      return await client.createJobExecution(args[0], signal);
    default:
      throw refusedArgument(String(operation), 'no such operation');
  }
}

function idArgument(operation: string, value: unknown): string {
  if (typeof value !== 'string' || value === '')
    throw refusedArgument(operation, 'the id must be a non-empty string');
  return value;
}

function fileArgument(value: unknown): { name: string; data: Uint8Array; contentType?: string } {
  if (!isPlainObject(value) || typeof value.name !== 'string' || !(value.data instanceof Uint8Array)) {
    throw refusedArgument(
      'files.upload',
      'the file must be { name: string, data: Uint8Array | string | Blob }',
    );
  }
  const file = { name: value.name, data: value.data };
  return typeof value.contentType === 'string' ? { ...file, contentType: value.contentType } : file;
}

function refusedArgument(operation: string, problem: string): ServiceCallRefusedError {
  return new ServiceCallRefusedError(`ctx.service ${operation} was not sent: ${problem}`);
}
