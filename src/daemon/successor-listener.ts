// Successor pacing in the daemon (DF_PIPELINE_PACING): the job definitions are read at start and with each
// task list refresh; when an execution's report is delivered and its job's next custom step is a task served
// here, that task's poll is brought forward to the pacing's instant. Events tell: this listens and asks the
// planner, which stays the one to decide, and the budget gate the one to let each poll through. Where the
// job-executions list can be read, it is read at its cadence and stands in for idle polls (JobRunWatch).
import { ResponseValidationError, ServiceError } from '../api/errors.ts';
import { monotonicAt, type Clock } from '../clock/clock.ts';
import type { ServiceClock } from '../clock/service-clock.ts';
import { JobRunWatch, listPays, type JobRunSource } from '../scheduler/job-run-watch.ts';
import type { PipelineModel } from '../scheduler/pipeline-model.ts';
import { PipelineSource, type JobSource, type PipelineLogger } from '../scheduler/pipeline-source.ts';
import type { PollPlanner } from '../scheduler/poll-planner.ts';
import type { SuccessorPacing } from '../scheduler/successor-pacing.ts';
import type { WorkerEvents } from '../events/worker-events.ts';

export interface SuccessorListenerOptions {
  source: JobSource;
  pacing: SuccessorPacing;
  planner: Pick<PollPlanner, 'awaitSuccessor' | 'replan'>;
  logger: PipelineLogger;
  /** The task keys served at start (the task list was read before the planner was made). */
  served: readonly string[];
  signal?: AbortSignal;
  /** Lets the polling loop see a poll brought forward outside a poll's answer (by the list). */
  recheck?: () => void;
  /**
   * False while this process does not poll (clustered: a replica without the coordinator lease): the
   * job-executions list, read for the poller's plan alone, is not read there. Default: always polling.
   */
  polling?: () => boolean;
  /**
   * The job-executions list, read every `everyMs` through the budget (see listIntervalFor); without it,
   * or once it proves unreadable (404, 403, a run lacking `jobId`, `status` or `createdAt`, not newest
   * first), the tasks are idle-polled as today, which is logged once.
   */
  jobRuns?:
    | {
        /** The client: its list, and its clock of the service's (runs' start times are the service's). */
        source: JobRunSource & { serviceClock: Pick<ServiceClock, 'monotonicAt'> };
        everyMs: number;
        clock: Clock;
      }
    | undefined;
}

/** Task list refreshes between two reads of job definitions that gave nothing usable. */
export const UNUSABLE_REREAD_REFRESHES = 7;

export function listenForSuccessors(events: WorkerEvents, o: SuccessorListenerOptions): Promise<void> {
  let model: PipelineModel | undefined;
  const source = new PipelineSource(o.source, o.served, o.logger);
  const read = async () => {
    model = await source.read(o.signal).catch(() => undefined);
    o.pacing.useModel(model);
    o.planner.replan();
  };
  // The job each claimed execution belongs to, until its report ends.
  const jobOf = new Map<string, string>();
  let served = o.served;
  // Where the last read gave nothing usable (no job listed, a 404), the jobs are read again only every
  // UNUSABLE_REREAD_REFRESHES task list refreshes (a week once every handler has its task): each read is a
  // request that, with more work than the month carries, is a claim fewer.
  let refreshesSinceRead = 0;
  events.on('tasks', (tasks) => {
    served = tasks.served;
    source.setServed(served);
    if (!model && ++refreshesSinceRead < UNUSABLE_REREAD_REFRESHES) return;
    refreshesSinceRead = 0;
    void read();
  });
  const runs = o.jobRuns;
  const watch =
    runs &&
    new JobRunWatch({
      ...runs,
      pacing: o.pacing,
      // As an execution's createdAt is read (poll-once.ts): through the service's clock, else the local one.
      monotonicAt: (ms) =>
        runs.source.serviceClock.monotonicAt(ms) ??
        Math.min(runs.clock.monotonic(), monotonicAt(runs.clock, ms)),
    });
  events.on('claim', ({ executionId, jobId }) => {
    if (jobId === undefined) return;
    jobOf.set(executionId, jobId);
    watch?.claimed(jobId);
  });
  /** Awaits the step after `task` in job run `jobId`, if one is served here: whether one is. */
  const reported = (task: string, jobId: string): boolean => {
    const successor = model?.successorAfter(source.jobKeyOf(jobId), task);
    if (!successor) return false;
    o.pacing.reported(successor, jobId);
    o.planner.awaitSuccessor(successor.task);
    return true;
  };
  events.on('report', ({ task, executionId, result }) => {
    const jobId = jobOf.get(executionId);
    jobOf.delete(executionId);
    if (result === 'delivered' && jobId !== undefined) reported(task, jobId);
  });
  // Clustered: what the other replicas reported reaches the coordinator, which alone polls, at a heartbeat:
  // outside a poll's answer, so the loop is told to plan again.
  events.on('replicaReport', ({ task, jobId }) => {
    if (reported(task, jobId)) o.recheck?.();
  });
  const first = read();
  if (watch && o.jobRuns) {
    const jobRuns = o.jobRuns;
    const paying = () => (model && listPays(model, served) ? model : undefined);
    void first.then(() => watchJobRuns(watch, jobRuns, paying, source, o));
  }
  return first;
}

/**
 * Reads the job-executions list at its cadence until it proves unreadable or the daemon stops; while
 * `model()` is undefined (no job definitions, or too few tasks for the list to pay), or this process does
 * not poll, it is not read.
 */
async function watchJobRuns(
  watch: JobRunWatch,
  jobRuns: NonNullable<SuccessorListenerOptions['jobRuns']>,
  model: () => PipelineModel | undefined,
  source: PipelineSource,
  o: SuccessorListenerOptions,
): Promise<void> {
  const listing = (on: boolean) => {
    if (o.pacing.listing === on) return;
    o.pacing.useJobList(on ? jobRuns.everyMs : undefined);
    o.planner.replan();
  };
  const unusable = (why: string) => {
    listing(false);
    const message = `The job-executions list is not used: ${why}; tasks are idle-polled as without it.`;
    o.logger.warn({ code: 'DFW_PIPELINE_UNREADABLE' }, message);
  };
  while (!o.signal?.aborted) {
    const current = o.polling?.() === false ? undefined : model();
    if (current) {
      try {
        const outcome = await watch.read(current, (id) => source.jobKeyOf(id), o.signal);
        if (outcome.kind === 'unusable') return unusable(outcome.why);
        listing(true);
        for (const task of outcome.awaited) o.planner.awaitSuccessor(task);
        if (outcome.awaited.length > 0) o.recheck?.();
      } catch (error) {
        if (o.signal?.aborted) return;
        const refused = error instanceof ServiceError && error.status >= 400 && error.status < 500;
        if (refused && error.status !== 429) return unusable(`it answered ${error.status}`);
        if (error instanceof ResponseValidationError) return unusable(error.message);
        // A failure that may pass (5xx, network): idle polls until the list answers again.
        listing(false);
      }
    } else listing(false);
    await jobRuns.clock.sleep(jobRuns.everyMs, o.signal).catch(() => undefined);
  }
}
