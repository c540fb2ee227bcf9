// The names of the service's operations, one per kind of request the client sends: the budget, the metrics,
// the emulator's fault table and the events (a request's `response`, a 429's pause) all use them. Kept on the
// events' floor, below the client, so the event map names them without importing the client.

/** Every operation the client can perform; budget, metrics and the emulator's fault table use these names. */
export type Operation =
  | 'tasks.list'
  | 'tasks.get'
  | 'tasks.create'
  | 'tasks.update'
  | 'tasks.delete'
  | 'tasks.poll'
  | 'executions.get'
  | 'executions.report'
  | 'files.upload'
  | 'files.get'
  | 'variables.get'
  | 'variables.update'
  | 'jobExecutions.get'
  | 'jobExecutions.create'
  | 'jobExecutions.list'
  | 'jobs.list';

export const OPERATIONS: readonly Operation[] = [
  'tasks.list',
  'tasks.get',
  'tasks.create',
  'tasks.update',
  'tasks.delete',
  'tasks.poll',
  'executions.get',
  'executions.report',
  'files.upload',
  'files.get',
  'variables.get',
  'variables.update',
  'jobExecutions.get',
  'jobExecutions.create',
  'jobExecutions.list',
  'jobs.list',
];
