// Clustered mode's journal: each claim of an execution is a BullMQ job (see claimJobId), added by the
// coordinator before anything else is done with it. The pipeline's journal calls land on that job: an outcome
// is stored in its data (a replica that takes the job up again reports it rather than run the handler again),
// and the report's end decides how the job ends (completed, failed as a dead letter, or retried elsewhere).
import type { Job } from 'bullmq';
import type { JsonObject } from '../api/types.ts';
import type { ExecutionJournal } from '../daemon/execution-journal.ts';
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
  /** W3C trace-context headers of the execution's trace, when the coordinator traces (see the `queued` event). */
  traceContext?: Record<string, string>;
  /** The replica that claimed it (the coordinator of the day). */
  claimedBy?: string;
  outcome?: OutcomeRecord;
}

/** How long a completed job is kept (then pruned, see QueuePruner), in ms. */
export const COMPLETED_KEEP_MS = 3_600_000;
/** How long a failed job (a report the service refused for good: a dead letter) is kept, in ms. */
export const FAILED_KEEP_MS = 7 * 86_400_000;

/**
 * The job id of one claim: the execution id and the claim's instant, so that an execution the service hands out
 * again after its report is a new job (and runs), while a second add of the same claim is a no-op.
 */
export function claimJobId(data: Pick<ExecutionJobData, 'executionId' | 'claimedAt'>): string {
  return `${data.executionId}@${Date.parse(data.claimedAt)}`;
}

/** How the pipeline left an execution: reported, refused for good, or not reported (this replica stops). */
export type JobEnd =
  { kind: 'delivered' } | { kind: 'dead-lettered'; answer: DeadLetter['answer'] } | { kind: 'left' };

export interface QueueJournalOptions {
  /**
   * Told as a job's report is settled (taken, or refused for good), before its processor returns: see
   * releaseClaim. Its failure must not reject (the caller logs it).
   */
  settled?: (executionId: string, jobId: string) => Promise<void>;
}

export class QueueJournal implements ExecutionJournal {
  readonly #jobs = new Map<
    string,
    { job: Job<ExecutionJobData>; end: JobEnd; released: PromiseWithResolvers<void> }
  >();
  readonly #settled: QueueJournalOptions['settled'];

  constructor(options: QueueJournalOptions = {}) {
    this.#settled = options.settled;
  }

  /**
   * The job being processed for its execution, until `release`. A job of an execution whose last job is still
   * held here (a new claim queued while that one ends) waits for its release: one job of an execution at a time.
   */
  async attach(job: Job<ExecutionJobData>): Promise<void> {
    const executionId = job.data.executionId;
    for (let held = this.#jobs.get(executionId); held; held = this.#jobs.get(executionId)) {
      await held.released.promise;
    }
    this.#jobs.set(executionId, { job, end: { kind: 'left' }, released: Promise.withResolvers<void>() });
  }

  /** The job being processed for the execution, if any. */
  job(executionId: string): Job<ExecutionJobData> | undefined {
    return this.#jobs.get(executionId)?.job;
  }

  /** How the pipeline left the execution; forgets the job. */
  release(executionId: string): JobEnd {
    const held = this.#jobs.get(executionId);
    this.#jobs.delete(executionId);
    held?.released.resolve();
    return held?.end ?? { kind: 'left' };
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

  async complete(executionId: string): Promise<void> {
    await this.#end(executionId, { kind: 'delivered' });
  }

  async deadLetter(executionId: string, answer: DeadLetter['answer']): Promise<void> {
    await this.#end(executionId, { kind: 'dead-lettered', answer });
  }

  async #end(executionId: string, end: JobEnd): Promise<void> {
    const held = this.#jobs.get(executionId);
    if (!held) return;
    held.end = end;
    await this.#settled?.(executionId, held.job.id!);
  }
}

/** The job as a journal record for ExecutionPipeline.resume: `crashes`, the runs that died with a replica. */
export function entryOfJob(job: Job<ExecutionJobData>, crashes: number): JournalEntry {
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
    starts: crashes,
    version: 1,
  };
}
