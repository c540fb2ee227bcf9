// Maps a service request's method and path to the operation it performs, accepting both path
// spellings the service uses (`data-factory`/`data_factory`, `task-executions`/`task_executions`).
import { OPERATIONS } from '../api/types.ts';
import type { EmulatorOperation } from './types.ts';

/** Every operation the routes name, for fault rules that target one. */
export const EMULATOR_OPERATIONS: readonly EmulatorOperation[] = [
  ...OPERATIONS,
  'variables.create',
  'variables.list',
  'variables.find',
];

export interface RouteMatch {
  operation: EmulatorOperation;
  /** The id in the path (task, execution, file, variable, job execution), when the route has one. */
  id?: string;
}

const ROUTES: { method: string; pattern: RegExp; operation: EmulatorOperation }[] = [
  { method: 'GET', pattern: /^\/v1\/data-factory\/tasks$/, operation: 'tasks.list' },
  { method: 'POST', pattern: /^\/v1\/data-factory\/tasks$/, operation: 'tasks.create' },
  { method: 'GET', pattern: /^\/v1\/data-factory\/tasks\/([^/]+)$/, operation: 'tasks.get' },
  { method: 'PUT', pattern: /^\/v1\/data-factory\/tasks\/([^/]+)$/, operation: 'tasks.update' },
  { method: 'DELETE', pattern: /^\/v1\/data-factory\/tasks\/([^/]+)$/, operation: 'tasks.delete' },
  { method: 'GET', pattern: /^\/v1\/data-factory\/tasks\/([^/]+)\/poll$/, operation: 'tasks.poll' },
  { method: 'GET', pattern: /^\/v1\/data-factory\/task-executions\/([^/]+)$/, operation: 'executions.get' },
  {
    method: 'PATCH',
    pattern: /^\/v1\/data-factory\/task-executions\/([^/]+)$/,
    operation: 'executions.report',
  },
  { method: 'POST', pattern: /^\/v2\/data-factory\/files$/, operation: 'files.upload' },
  { method: 'GET', pattern: /^\/v2\/data-factory\/files\/([^/]+)$/, operation: 'files.get' },
  { method: 'POST', pattern: /^\/v1\/data-factory\/variables$/, operation: 'variables.create' },
  { method: 'GET', pattern: /^\/v1\/data-factory\/variables$/, operation: 'variables.list' },
  { method: 'POST', pattern: /^\/v1\/data-factory\/variables\/find$/, operation: 'variables.find' },
  { method: 'GET', pattern: /^\/v1\/data-factory\/variables\/([^/]+)$/, operation: 'variables.get' },
  { method: 'PUT', pattern: /^\/v1\/data-factory\/variables\/([^/]+)$/, operation: 'variables.update' },
  { method: 'GET', pattern: /^\/v1\/data-factory\/job-executions\/([^/]+)$/, operation: 'jobExecutions.get' },
  { method: 'POST', pattern: /^\/v1\/data-factory\/job-executions$/, operation: 'jobExecutions.create' },
  { method: 'GET', pattern: /^\/v1\/data-factory\/job-executions$/, operation: 'jobExecutions.list' },
  { method: 'GET', pattern: /^\/v1\/data-factory\/jobs$/, operation: 'jobs.list' },
];

/** The hyphen spelling of a path, without a trailing slash. */
export function canonicalPath(path: string): string {
  const canonical = path
    .replace(/^\/(v\d+)\/data_factory(?=\/|$)/, '/$1/data-factory')
    .replace(/\/task_executions(?=\/|$)/, '/task-executions')
    .replace(/\/job_executions(?=\/|$)/, '/job-executions');
  return canonical.length > 1 ? canonical.replace(/\/+$/, '') : canonical;
}

export function matchRoute(method: string, path: string): RouteMatch | undefined {
  const canonical = canonicalPath(path);
  for (const route of ROUTES) {
    if (route.method !== method) continue;
    const match = route.pattern.exec(canonical);
    if (!match) continue;
    const raw = match[1];
    if (raw === undefined) return { operation: route.operation };
    try {
      return { operation: route.operation, id: decodeURIComponent(raw) };
    } catch {
      return undefined; // a malformed %-escape names no resource
    }
  }
  return undefined;
}
