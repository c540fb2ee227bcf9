// The service client's public surface: the client, its errors and the service's record types.
export { ServiceClient } from './client.ts';
export type {
  ExecutionReport,
  FileUpload,
  GateAnswer,
  RequestGate,
  ResponseEvent,
  ServiceClientOptions,
} from './client.ts';
export {
  NetworkError,
  ReportValidationError,
  ResponseValidationError,
  ServiceClientError,
  ServiceError,
  TimeoutError,
} from './errors.ts';
export type { RequestReach, ServiceErrorDetails, TimeoutPhase } from './errors.ts';
export type { PathStyle } from './paths.ts';
export { OPERATIONS } from './types.ts';
export type {
  ErrorEnvelope,
  JobContext,
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
} from './types.ts';
