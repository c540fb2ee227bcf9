// What a replica does with a job of the cluster's queue: runs its execution through the execution pipeline
// (first run, a run taken up again after its replica died, or only the report of a kept outcome), then ends
// the job as the report ended: completed, failed for good (a dead letter), or failed to be retried elsewhere.
import { UnrecoverableError, type Job } from 'bullmq';
import type { TaskExecution } from '../api/types.ts';
import type { ClaimOrigin, WorkerEvents } from '../events/worker-events.ts';
import type { ExecutionPipeline } from '../daemon/execution-pipeline.ts';
import type { PolledTask } from '../scheduler/scheduler.ts';
import type { JobFence } from './job-fence.ts';
import { entryOfJob, type ExecutionJobData, type JobEnd, type QueueJournal } from './queue-journal.ts';

export interface ExecutionProcessorOptions {
  pipeline: ExecutionPipeline;
  journal: QueueJournal;
  events: WorkerEvents;
  /** DF_JOURNAL_REPLAY: run again, or report FAILED, an execution whose replica died under it. */
  replay: 'rerun' | 'fail';
  /** Returned as the job's value: which replica ran it. */
  replicaId: string;
  /** Tells runs that died with their replica from runs that only lost their lock (a stall). */
  fence: JobFence;
  /** DF_MAX_CRASHES_PER_EXECUTION. */
  maxCrashes: number;
  /** Aborted when the daemon stops: a poison verdict waiting for a stalled replica ends early. */
  signal: AbortSignal;
}

export function executionProcessor(
  o: ExecutionProcessorOptions,
): (job: Job<ExecutionJobData>) => Promise<string> {
  return async (job) => {
    const data = job.data;
    const polled: PolledTask = { taskId: data.taskId, key: data.taskKey };
    const origin: ClaimOrigin = {
      queuedAt: job.timestamp,
      runBy: o.replicaId,
      ...(data.traceContext ? { traceContext: data.traceContext } : {}),
      ...(data.claimedBy === undefined ? {} : { claimedBy: data.claimedBy }),
    };
    await o.journal.attach(job);
    let end: JobEnd;
    try {
      if (data.unreadable !== undefined && !data.outcome) {
        await o.pipeline.failUnreadable(polled, data.executionId, data.unreadable, origin);
      } else if (data.outcome || job.stalledCounter > 0 || job.attemptsMade > 0) {
        // Taken up again: its replica died under it, stalled past its lock, or stopped before the report got
        // through. The pipeline applies the poison-execution limit to the runs that died (not those that stalled).
        o.events.emit('replay', { phase: data.outcome ? 'finished' : 'claimed' });
        const crashes =
          data.outcome || o.replay === 'fail' ? 0 : await o.fence.crashes(job, o.maxCrashes, o.signal);
        await o.pipeline.resume(entryOfJob(job, crashes), o.replay, origin);
      } else {
        const execution: TaskExecution = {
          object: 'task_execution',
          id: data.executionId,
          taskId: data.taskId,
          createdAt: data.createdAt,
          status: 'IN_PROGRESS',
          input: data.input,
        };
        await o.pipeline.process(polled, execution, origin);
      }
    } finally {
      end = o.journal.release(data.executionId);
      o.fence.forget(job.id!);
    }
    if (end.kind === 'dead-lettered') {
      // Kept in the queue's failed jobs for an operator, as the dead-letter folder keeps them standalone.
      const { status, code, message } = end.answer;
      throw new UnrecoverableError(
        `the service refused the report for good (${status}${code ? ` ${code}` : ''}): ${message ?? ''}`,
      );
    }
    if (end.kind === 'left') {
      throw new Error(
        `execution ${data.executionId}: report not delivered by this replica (it stops, or could not show it ` +
          'still holds the job); retried',
      );
    }
    return o.replicaId;
  };
}
