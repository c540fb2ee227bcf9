// The service client's public surface: the client, its errors and the service's record types.
export { ServiceClient } from './client.ts';
export type {
  ExecutionReport,
  FileUpload,
  GateAnswer,
  RequestGate,
  ResponseEvent,
  ServiceClientOptions,
  VariableUpdateOptions,
} from './client.ts';
export {
  NetworkError,
  PreconditionFailedError,
  ReportValidationError,
  ResponseValidationError,
  ServiceClientError,
  ServiceError,
  TimeoutError,
} from './errors.ts';
export type { RequestReach, ServiceErrorDetails, TimeoutPhase } from './errors.ts';
export type { PathStyle } from './paths.ts';
export { PathStyleError } from './path-style.ts';
export { UploadTooLargeError } from './file-limits.ts';
export {
  FILE_LIFETIME_DAYS,
  MAX_PAGE_SIZE,
  MAX_UPLOAD_BYTES,
  SERVICE_REQUEST_LIMITS,
  type RequestLimits,
} from './service-limits.ts';
export type { PathStyleResolution, PathStyleSetting } from './path-style.ts';
export { OPERATIONS } from './types.ts';
export type {
  ErrorEnvelope,
  JobContext,
  JobExecution,
  JobRunRecord,
  JsonObject,
  KeyDescription,
  ListEnvelope,
  Operation,
  ReportStatus,
  ServiceFile,
  Task,
  TaskDefinition,
  TaskExecution,
  TaskExecutionStatus,
  Variable,
  VariableUpdate,
  VersionedVariable,
} from './types.ts';
