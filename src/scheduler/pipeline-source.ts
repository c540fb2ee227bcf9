// Where the pipeline model comes from: the service's job definitions (`GET` jobs, paged, every page through
// the budget), read rarely. When they cannot be read (a 404, no usable job: a member missing or of another
// type) successor pacing stays off and today's planner polls as before; that is one warn line, once, not per
// refresh, and without a stack: it is an answer the service may give, not a defect here. An empty list is
// not a degrade at all (an account, or the emulator, with no job yet): one info line; the jobs are read again
// later (see successor-listener.ts).
import type { Job } from '../api/types.ts';
import type { ErrorCode } from '../errors/catalogue.ts';
import { PipelineModel, type JobDefinition, type JobStep } from './pipeline-model.ts';

/** The job definitions could not be read or held nothing usable: successor pacing is off. */
export class PipelineUnreadableError extends Error {
  override name = 'PipelineUnreadableError';
  readonly code: ErrorCode = 'DFW_PIPELINE_UNREADABLE';
}

export interface JobSource {
  listJobs(options?: { signal?: AbortSignal }): Promise<Job[]>;
}

export interface PipelineLogger {
  warn(object: object, message: string): void;
  info(object: object, message: string): void;
}

/** A job record read into a definition, or undefined when it lacks a string `key` or a `tasks` array. */
export function toJobDefinition(job: Job): JobDefinition | undefined {
  const { key, tasks, pipeline } = job;
  if (typeof key !== 'string' || !Array.isArray(tasks)) return undefined;
  const steps: JobStep[] = [];
  for (const step of tasks as unknown[]) {
    const { name, type } = (step ?? {}) as { name?: unknown; type?: unknown };
    if (typeof name !== 'string' || typeof type !== 'string') return undefined;
    steps.push({ name, type });
  }
  return { key, ...(typeof pipeline === 'string' ? { pipeline } : {}), tasks: steps };
}

export class PipelineSource {
  readonly #source: JobSource;
  #served: readonly string[];
  readonly #logger: PipelineLogger;
  #warned = false;
  #toldNoJob = false;
  /** Job keys by the id the service gave each job (what an execution's `context.jobId` names). */
  #keyById = new Map<string, string>();

  constructor(source: JobSource, served: readonly string[], logger: PipelineLogger) {
    this.#source = source;
    this.#served = served;
    this.#logger = logger;
  }

  /** The tasks served from now on (after a task list refresh). */
  setServed(served: readonly string[]): void {
    this.#served = served;
  }

  /** The model from the job definitions now, or undefined (today's planner) when they cannot be read. */
  async read(signal?: AbortSignal): Promise<PipelineModel | undefined> {
    let jobs: Job[];
    try {
      jobs = await this.#source.listJobs(signal ? { signal } : {});
    } catch (error) {
      if (signal?.aborted) throw error;
      this.#degrade(`the job definitions could not be read (${(error as Error).message})`);
      return undefined;
    }
    const definitions = jobs.flatMap((job) => toJobDefinition(job) ?? []);
    this.#keyById = new Map(
      jobs.flatMap((job) =>
        typeof job.id === 'string' && typeof job.key === 'string' ? [[job.id, job.key] as const] : [],
      ),
    );
    if (jobs.length === 0) {
      if (!this.#toldNoJob) {
        this.#toldNoJob = true;
        this.#logger.info(
          {},
          'Successor pacing waits for a job: the service lists none yet; tasks are polled by their own arrivals.',
        );
      }
      return undefined;
    }
    if (definitions.length === 0) {
      this.#degrade(`none of the ${jobs.length} jobs listed has a "key" and a "tasks" array of {name, type}`);
      return undefined;
    }
    return new PipelineModel(definitions, this.#served, { complete: definitions.length === jobs.length });
  }

  /** The key of the job an execution's `context.jobId` names (its id, or its key itself), as last read. */
  jobKeyOf(jobId: string): string {
    return this.#keyById.get(jobId) ?? jobId;
  }

  #degrade(why: string): void {
    if (this.#warned) return;
    this.#warned = true;
    const error = new PipelineUnreadableError(
      `Successor pacing is off: ${why}; tasks are polled by their own arrivals only.`,
    );
    // No `err`: a stack would say where the daemon noticed, which the code and the message already say.
    this.#logger.warn({ code: error.code }, error.message);
  }
}
