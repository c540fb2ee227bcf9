// The one place that spells the service's paths. The spec shows both `data-factory/task-executions` and
// `data_factory/task_executions` without saying which is canonical, so the spelling is a single setting.

export type PathStyle = 'hyphen' | 'underscore';

export interface ServicePaths {
  tasks(): string;
  task(id: string): string;
  poll(taskId: string): string;
  execution(id: string): string;
  files(): string;
  file(id: string): string;
  variable(id: string): string;
  jobExecutions(): string;
  jobExecution(id: string): string;
  jobs(): string;
}

/** Builds the paths for one spelling under an optional prefix taken from the base URL (e.g. `/proxy`). */
export function servicePaths(style: PathStyle, prefix = ''): ServicePaths {
  const factory = style === 'hyphen' ? 'data-factory' : 'data_factory';
  const executions = style === 'hyphen' ? 'task-executions' : 'task_executions';
  const jobExecutions = style === 'hyphen' ? 'job-executions' : 'job_executions';
  const base = prefix.replace(/\/+$/, '');
  const v1 = `${base}/v1/${factory}`;
  return {
    tasks: () => `${v1}/tasks`,
    task: (id) => `${v1}/tasks/${encodeURIComponent(id)}`,
    poll: (taskId) => `${v1}/tasks/${encodeURIComponent(taskId)}/poll`,
    execution: (id) => `${v1}/${executions}/${encodeURIComponent(id)}`,
    // Files v1 is deprecated (part 4.4); v2 has the same operations.
    files: () => `${base}/v2/${factory}/files`,
    file: (id) => `${base}/v2/${factory}/files/${encodeURIComponent(id)}`,
    variable: (id) => `${v1}/variables/${encodeURIComponent(id)}`,
    jobExecutions: () => `${v1}/${jobExecutions}`,
    jobExecution: (id) => `${v1}/${jobExecutions}/${encodeURIComponent(id)}`,
    jobs: () => `${v1}/jobs`,
  };
}
