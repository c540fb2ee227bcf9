// The service emulator's public surface: the server, its option and record types, and its errors.
export { Emulator } from './emulator.ts';
export { inProcessTransport } from './in-process.ts';
export { busiestWindow } from './arrival-watch.ts';
export { DEFAULT_LIMITS } from './limits.ts';
export {
  EmulatorStateError,
  InvalidFaultRuleError,
  InvalidTaskDefinitionError,
  UnknownTaskError,
  VariableExistsError,
} from './errors.ts';
export type {
  EmulatedExecution,
  EmulatorLimits,
  EmulatorOptions,
  EmulatorOperation,
  FaultRule,
  NewVariable,
  RequestRecord,
  RequeueMode,
  ResponseTimeout,
} from './types.ts';
