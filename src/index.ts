// The public API of df-worker: what handler modules import (`import { defineTask } from 'df-worker'`) and the types
// that describe tasks, executions and outcomes. Nothing internal is exported from here.
// First import: on a Node.js too old for df-worker, importing the package throws one line naming the version.
import './runtime/require-node.ts';
export { defineTask, NonRetryableError } from './handlers/define-task.ts';
export type { TaskContext, TaskModule, TaskSpec } from './handlers/define-task.ts';
export { runTaskLocally } from './runner/run-locally.ts';
export type { ExecutionOutcome } from './runner/run-execution.ts';
export type { JobContext, JsonObject, KeyDescription, TaskExecution } from './api/types.ts';
