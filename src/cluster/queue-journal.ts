// Clustered mode's journal: each claimed execution is a BullMQ job (job id = execution id), added by the
// coordinator before anything else is done with it. The pipeline's journal calls land on that job: an outcome
// is stored in its data (a replica that takes the job up again reports it rather than run the handler again),
// and the report's end decides how the job ends (completed, failed as a dead letter, or retried elsewhere).
import type { Job } from 'bullmq';
import type { JsonObject } from '../api/types.ts';
import type { ExecutionJournal } from '../daemon/execution-pipeline.ts';
import type { ClaimRecord, DeadLetter, JournalEntry, OutcomeRecord } from '../journal/records.ts';

/** A job's data: the claim as polled, and once the handler ended, its outcome. */
export interface ExecutionJobData {
  taskId: string;
  taskKey: string;
  executionId: string;
  input: JsonObject;
  createdAt: string;
  claimedAt: string;
  /** The poll answer could not be run (see Scheduler's failUnreadable): reported FAILED with this problem. */
  unreadable?: string;
  outcome?: OutcomeRecord;
}

/** How the pipeline left an execution: reported, refused for good, or not reported (this replica stops). */
export type JobEnd =
  { kind: 'delivered' } | { kind: 'dead-lettered'; answer: DeadLetter['answer'] } | { kind: 'left' };

export class QueueJournal implements ExecutionJournal {
  readonly #jobs = new Map<string, { job: Job<ExecutionJobData>; end: JobEnd }>();

  /** The job being processed for its execution, until `release`. */
  attach(job: Job<ExecutionJobData>): void {
    this.#jobs.set(job.data.executionId, { job, end: { kind: 'left' } });
  }

  /** How the pipeline left the execution; forgets the job. */
  release(executionId: string): JobEnd {
    const end = this.#jobs.get(executionId)?.end ?? { kind: 'left' };
    this.#jobs.delete(executionId);
    return end;
  }

  /** The job is the claim's record already; an outcome given with it (an unreadable answer) is stored. */
  async recordClaim(_claim: ClaimRecord, outcome?: OutcomeRecord): Promise<void> {
    if (outcome) await this.recordOutcome(_claim.executionId, outcome);
  }

  /** BullMQ counts a run that died with its replica itself (the job's stalledCounter). */
  recordStart(): Promise<void> {
    return Promise.resolve();
  }

  async recordOutcome(executionId: string, outcome: OutcomeRecord): Promise<void> {
    const held = this.#jobs.get(executionId);
    if (!held) return;
    await held.job.updateData({ ...held.job.data, outcome });
  }

  recordReportAttempt(): Promise<void> {
    return Promise.resolve();
  }

  complete(executionId: string): Promise<void> {
    const held = this.#jobs.get(executionId);
    if (held) held.end = { kind: 'delivered' };
    return Promise.resolve();
  }

  deadLetter(executionId: string, answer: DeadLetter['answer']): Promise<void> {
    const held = this.#jobs.get(executionId);
    if (held) held.end = { kind: 'dead-lettered', answer };
    return Promise.resolve();
  }
}

/** The job as a journal record for ExecutionPipeline.resume: `starts` is the runs that died with a replica. */
export function entryOfJob(job: Job<ExecutionJobData>): JournalEntry {
  const data = job.data;
  return {
    executionId: data.executionId,
    taskId: data.taskId,
    taskKey: data.taskKey,
    input: data.input,
    createdAt: data.createdAt,
    claimedAt: data.claimedAt,
    phase: data.outcome ? 'finished' : 'claimed',
    ...(data.outcome ? { outcome: data.outcome } : {}),
    reportAttempts: 0,
    starts: job.stalledCounter,
    version: 1,
  };
}
