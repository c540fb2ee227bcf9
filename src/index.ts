// The public API of df-worker: what handler modules import (`import { defineTask } from 'df-worker'`) and the types
// that describe tasks, executions and outcomes. Nothing internal is exported from here.
// First import: on a Node.js too old for df-worker, importing the package throws one line naming the version.
import './runtime/require-node.ts';
export { defineTask, NonRetryableError } from './handlers/define-task.ts';
export type { TaskContext, TaskModule, TaskSpec } from './handlers/define-task.ts';
export { ServiceCallRefusedError } from './handlers/task-service.ts';
export type { HandlerFile, TaskServiceClient } from './handlers/task-service.ts';
export { runTaskLocally } from './runner/run-locally.ts';
export type { ExecutionOutcome } from './runner/run-execution.ts';
export type {
  JobContext,
  JobExecution,
  JsonObject,
  KeyDescription,
  ServiceFile,
  TaskExecution,
  Variable,
  VariableUpdate,
  VersionedVariable,
} from './api/types.ts';
// The client (handler tests give runTaskLocally one on an Emulator as `service`) and the errors ctx.service throws.
export { ServiceClient } from './api/client.ts';
export {
  NetworkError,
  PreconditionFailedError,
  ResponseValidationError,
  ServiceClientError,
  ServiceError,
  TimeoutError,
} from './api/errors.ts';
export { UploadTooLargeError } from './api/file-limits.ts';
export { PathStyleError } from './api/path-style.ts';
export { Emulator } from './emulator/emulator.ts';
