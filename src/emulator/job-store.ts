// The emulator's jobs and job executions (the runs a job's pipeline makes): kept as given, since the service
// documents neither's fields, with the ids and instants the service adds.
import type { Clock } from '../clock/clock.ts';
import type { JobExecution, JsonObject } from '../api/types.ts';

export class JobStore {
  readonly #clock: Clock;
  // Insertion order is creation order: lists rely on it.
  readonly #jobs = new Map<string, JsonObject>();
  readonly #executions = new Map<string, JobExecution>();
  #sequence = { job: 0, execution: 0 };

  constructor(clock: Clock) {
    this.#clock = clock;
  }

  /** Records a job definition as given (its fields are not documented, part 4.6), with an id. */
  create(definition: JsonObject): JsonObject {
    const id = `job-${++this.#sequence.job}`;
    const record: JsonObject = { object: 'job', id, createdAt: this.#isoNow(), ...definition };
    this.#jobs.set(id, record);
    return record;
  }

  /** Every job, oldest first. */
  list(): JsonObject[] {
    return [...this.#jobs.values()];
  }

  /** Records a job execution from the create body; its fields are not documented, so the body is kept as sent. */
  createExecution(body: JsonObject): JobExecution {
    const id = `job-execution-${++this.#sequence.execution}`;
    const record: JobExecution = { ...body, object: 'job_execution', id, createdAt: this.#isoNow() };
    this.#executions.set(id, record);
    return record;
  }

  /** Every job execution, oldest first (the list's order unless a sort is asked). */
  executions(): JobExecution[] {
    return [...this.#executions.values()];
  }

  getExecution(id: string): JobExecution | undefined {
    return this.#executions.get(id);
  }

  /**
   * A run of job `jobId` leaves its pipeline's queue now: recorded as the service's example shows a run
   * (`jobId`, `pipelineId`, `createdAt`, `startedAt`, `status`), `IN_PROGRESS` until `endRun`.
   */
  startRun(jobId: string, fields: JsonObject = {}): JobExecution {
    const at = this.#isoNow();
    const id = `job-execution-${++this.#sequence.execution}`;
    const record: JobExecution = {
      object: 'job_execution',
      id,
      jobId,
      createdAt: at,
      startedAt: at,
      status: 'IN_PROGRESS',
      ...fields,
    };
    this.#executions.set(id, record);
    return record;
  }

  /** A run ended now with `status` (`COMPLETED` by default); undefined when no run has this id. */
  endRun(id: string, status = 'COMPLETED'): JobExecution | undefined {
    const record = this.#executions.get(id);
    if (!record) return undefined;
    record.status = status;
    record.endedAt = this.#isoNow();
    return record;
  }

  /** Drops every job and execution and restarts both ids at 1. */
  reset(): void {
    this.#jobs.clear();
    this.#executions.clear();
    this.#sequence = { job: 0, execution: 0 };
  }

  #isoNow(): string {
    return new Date(this.#clock.now()).toISOString();
  }
}
