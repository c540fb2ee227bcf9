// Successor pacing in the daemon (DF_PIPELINE_PACING): the job definitions are read at start and with each
// task list refresh; when an execution's report is delivered and its job's next custom step is a task served
// here, that task's poll is brought forward to the pacing's instant. Events tell: this listens and asks the
// planner, which stays the one to decide, and the budget gate the one to let each poll through.
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
}

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
  events.on('tasks', ({ served }) => {
    source.setServed(served);
    void read();
  });
  events.on('claim', ({ executionId, jobId }) => {
    if (jobId !== undefined) jobOf.set(executionId, jobId);
  });
  events.on('report', ({ task, executionId, result }) => {
    const jobId = jobOf.get(executionId);
    jobOf.delete(executionId);
    if (result !== 'delivered' || jobId === undefined || !model) return;
    const successor = model.successorAfter(source.jobKeyOf(jobId), task);
    if (!successor) return;
    o.pacing.reported(successor, jobId);
    o.planner.awaitSuccessor(successor.task);
  });
  return read();
}
