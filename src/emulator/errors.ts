// Errors the emulator's in-process API throws; over HTTP the admin surface turns them into 4xx answers.
import type { ErrorCode } from '../errors/catalogue.ts';

/** `enqueueExecution` (or the admin surface) named a task that does not exist. */
export class UnknownTaskError extends Error {
  override name = 'UnknownTaskError';
  readonly code: ErrorCode = 'DFW_EMULATOR_UNKNOWN_TASK';
  readonly task: string;
  constructor(task: string) {
    super(
      `No emulated task has id or key '${task}'; create it first with createTask or POST /__admin/tasks.`,
    );
    this.task = task;
  }
}

/** A task definition lacks its key or has a member of the wrong type. */
export class InvalidTaskDefinitionError extends Error {
  override name = 'InvalidTaskDefinitionError';
  readonly code: ErrorCode = 'DFW_EMULATOR_TASK_INVALID';
}

/** A fault rule is malformed; the message names the rule's index and the bad member. */
export class InvalidFaultRuleError extends Error {
  override name = 'InvalidFaultRuleError';
  readonly code: ErrorCode = 'DFW_EMULATOR_FAULT_INVALID';
}

/** The emulator was asked for its URL before `listen()`, or to listen twice. */
export class EmulatorStateError extends Error {
  override name = 'EmulatorStateError';
  readonly code: ErrorCode = 'DFW_EMULATOR_STATE';
}

/** `createVariable` (or the admin surface) was given an id that a variable has already. */
export class VariableExistsError extends Error {
  override name = 'VariableExistsError';
  readonly code: ErrorCode = 'DFW_EMULATOR_VARIABLE_EXISTS';
  readonly id: string;
  constructor(id: string) {
    super(`A variable has id '${id}' already; give the new one another id, or update it with PUT.`);
    this.id = id;
  }
}
