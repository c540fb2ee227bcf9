// The job-executions list standing in for idle polls: each run it shows in progress for the first time
// announces the steps of its job that no report of ours does (its first custom step, say), which are then
// awaited like a successor (SuccessorPacing) from the run's start. One list request a few minutes apart
// replaces the idle polls of every such task; the month replay showed it pays on many tasks (see
// CONTRIBUTING, "Pacing: measurement history"). What a run record holds is in api/types.ts (JobRunRecord).
import type { JobRunRecord, ListEnvelope } from '../api/types.ts';
import type { Clock } from '../clock/clock.ts';
import type { PipelineModel } from './pipeline-model.ts';
import type { SuccessorPacing } from './successor-pacing.ts';

export interface JobRunSource {
  listJobExecutions(options: {
    page?: number;
    pageSize?: number;
    signal?: AbortSignal;
  }): Promise<ListEnvelope<JobRunRecord>>;
}

/** Share of the month's requests the list may take: its cadence at the key's budget (see listIntervalFor). */
export const JOB_LIST_SHARE = 0.25;
/** The list is never read more often than this, whatever the budget. */
export const MIN_JOB_LIST_INTERVAL_MS = 60_000;
const MONTH_MS = 30 * 86_400_000;

/** How often the list is read for a month's budget of `perMonth` requests: 259 s at the service's 40,000. */
export function listIntervalFor(perMonth: number): number {
  return Math.max(MIN_JOB_LIST_INTERVAL_MS, Math.ceil(MONTH_MS / Math.max(1, perMonth * JOB_LIST_SHARE)));
}

/**
 * Whether the list pays for the idle polls it replaces: those of the served tasks a job runs unannounced
 * (IdleRole `arrivals`). Each such task is idle-polled about every `count` × (month / budget); the list every
 * (month / budget) / JOB_LIST_SHARE. So it pays from 1 / JOB_LIST_SHARE such tasks (4): below that, each is
 * polled more often than the list would show its runs.
 */
export function listPays(model: PipelineModel, served: readonly string[]): boolean {
  const replaced = served.filter((task) => model.inAnyJob(task) && model.idleRole(task) === 'arrivals');
  return replaced.length >= Math.round(1 / JOB_LIST_SHARE);
}

/** A run is over once it has an end or a final status; the service's example shows `COMPLETED`. */
const ENDED = new Set(['COMPLETED', 'FAILED', 'CANCELED', 'CANCELLED', 'ABORTED', 'TERMINATED', 'TIMED_OUT']);
export const runEnded = (run: JobRunRecord): boolean =>
  (typeof run.endedAt === 'string' && run.endedAt !== '') || ENDED.has(run.status.toUpperCase());

export interface JobRunWatchOptions {
  source: JobRunSource;
  pacing: Pick<SuccessorPacing, 'reported'>;
  clock: Pick<Clock, 'monotonic'>;
  /** The local monotonic instant the service's clock read `serviceMs` (ServiceClock.monotonicAt). */
  monotonicAt: (serviceMs: number) => number | undefined;
  /** Runs a page. Default 100. */
  pageSize?: number;
  /** Pages read at most per list (only while every run on a page is new). Default 3. */
  maxPages?: number;
}

/** What one read of the list found: the tasks now awaited, or why the list cannot be used. */
export type JobListOutcome =
  | { kind: 'listed'; awaited: string[]; requests: number }
  | { kind: 'unusable'; why: string; requests: number };

const SEEN_KEPT = 10_000;

export class JobRunWatch {
  readonly #o: JobRunWatchOptions;
  readonly #pageSize: number;
  readonly #maxPages: number;
  /** Run ids already shown (the newest, bounded). */
  readonly #seen = new Set<string>();
  /** The newest `createdAt` seen (service ms): a page older than it holds nothing new. */
  #horizonMs = -Infinity;
  /** When a step of each job run was last claimed here (monotonic): a run whose step came first awaits none. */
  readonly #claimedAt = new Map<string, number>();

  constructor(options: JobRunWatchOptions) {
    this.#o = options;
    this.#pageSize = options.pageSize ?? 100;
    this.#maxPages = Math.max(1, options.maxPages ?? 3);
  }

  /** An execution of job run `run` (its `context.jobId`) was claimed now. */
  claimed(run: string): void {
    this.#claimedAt.set(run, this.#o.clock.monotonic());
  }

  /**
   * Reads the list (newest first, page after page while a page is all new) and awaits the steps each new
   * run in progress announces. Throws what the client threw (a 404, a 403, a network failure).
   */
  async read(
    model: PipelineModel,
    jobKeyOf: (jobId: string) => string,
    signal?: AbortSignal,
  ): Promise<JobListOutcome> {
    const fresh: JobRunRecord[] = [];
    let requests = 0;
    let newest = this.#horizonMs;
    for (let page = 0; page < this.#maxPages; page++) {
      const envelope = await this.#o.source.listJobExecutions({
        page,
        pageSize: this.#pageSize,
        ...(signal ? { signal } : {}),
      });
      requests++;
      let previous = Infinity;
      let allNew = true;
      for (const run of envelope.data) {
        const createdMs = Date.parse(run.createdAt);
        if (Number.isNaN(createdMs)) return { kind: 'unusable', why: `run ${run.id} has no date`, requests };
        if (createdMs > previous) {
          return { kind: 'unusable', why: 'the list is not sorted newest first by createdAt', requests };
        }
        previous = createdMs;
        newest = Math.max(newest, createdMs);
        if (createdMs < this.#horizonMs) allNew = false;
        if (!this.#seen.has(run.id)) fresh.push(run);
      }
      // The first read only takes the newest page: older runs have mostly ended.
      const full = envelope.data.length >= this.#pageSize;
      if (!full || !allNew || this.#horizonMs === -Infinity) break;
    }
    this.#horizonMs = newest;
    return { kind: 'listed', awaited: this.#await(fresh, model, jobKeyOf), requests };
  }

  #await(runs: JobRunRecord[], model: PipelineModel, jobKeyOf: (jobId: string) => string): string[] {
    const awaited = new Set<string>();
    for (const run of runs) {
      this.#remember(run.id);
      if (runEnded(run)) continue;
      const startedMs = Date.parse(run.startedAt ?? run.createdAt);
      const startedAt = Number.isNaN(startedMs) ? undefined : this.#o.monotonicAt(startedMs);
      const claimedAt = this.#claimedAt.get(run.jobId);
      if (claimedAt !== undefined && startedAt !== undefined && claimedAt >= startedAt) continue;
      for (const step of model.stepsAfterStart(jobKeyOf(run.jobId))) {
        this.#o.pacing.reported(step, run.jobId, startedAt);
        awaited.add(step.task);
      }
    }
    return [...awaited];
  }

  #remember(id: string): void {
    this.#seen.add(id);
    if (this.#seen.size <= SEEN_KEPT) return;
    const oldest = this.#seen.values().next().value;
    if (oldest !== undefined) this.#seen.delete(oldest);
  }
}
