// One poll of one task and what its answer leads to: a claim dispatched, an empty answer, an unusable
// answer reported FAILED, a cut answer read back by id or counted lost, a refused key, a back-off. The loop
// that decides which task to poll and when, and holds the slots, is scheduler.ts.
import { NetworkError, ResponseValidationError, TimeoutError } from '../api/errors.ts';
import { topLevelString } from '../api/json-prefix.ts';
import type { TaskExecution } from '../api/types.ts';
import { monotonicAt } from '../clock/clock.ts';
import type { PollAnswerLoss, PollResult, WorkerEventMap } from '../events/worker-events.ts';
import { classifyFailure } from '../reports/retry-policy.ts';
import { jobIdOf } from './successor-pacing.ts';
import type { PolledTask, SchedulerOptions } from './scheduler-options.ts';

/** What a poll does to the loop that sent it. */
export interface PollEffects {
  /** Counts claimed work (a dispatch, a FAILED report of an unusable answer) against the task's slots. */
  track(work: Promise<void>): void;
  /** The service accepted (a 2xx) or refused (401) the key. */
  setAuthorized(authorized: boolean, error?: unknown): void;
}

export async function pollOnce(
  o: SchedulerOptions,
  task: PolledTask,
  signal: AbortSignal,
  effects: PollEffects,
): Promise<void> {
  const { client, planner, clock, logger } = o;
  const started = clock.monotonic();
  planner.sending(task.taskId);
  let execution: TaskExecution | null;
  try {
    execution = await client.pollTask(task.taskId, signal, o.cutPolls);
  } catch (error) {
    const cut = o.cutPolls;
    if (cut?.aborted === true && error === cut.reason) {
      // Sent before the stop (a poll still waiting for the budget was cancelled by it) and unanswered since.
      pollAnswerLost(o, task, started, clock.monotonic(), 'shutdown', error);
      return;
    }
    if (signal.aborted && !(error instanceof NetworkError || error instanceof ResponseValidationError))
      return;
    const now = clock.monotonic();
    told(o, task, 'error', now - started);
    const action = classifyFailure(error);
    if (error instanceof ResponseValidationError) {
      const { executionId } = error;
      const failUnreadable = o.failUnreadable;
      if (executionId !== undefined && failUnreadable) {
        logger.error(
          { taskKey: task.key, taskId: task.taskId, executionId, err: error },
          'poll answer unusable; reporting the execution FAILED so its job does not wait for it',
        );
        effects.track(failUnreadable(task, executionId, error.problem));
      } else {
        pollAnswerLost(o, task, started, now, error.field === '(body)' ? 'not-json' : 'no-id', error);
      }
      planner.onError(task.taskId, now);
    } else if (error instanceof NetworkError && error.mayHaveBeenApplied) {
      const recovered = await readBackCutClaim(o, task, error);
      if (recovered) {
        planner.onHit(task.taskId, clock.monotonic(), arrivedAt(o, recovered), jobIdOf(recovered));
        effects.track(o.dispatch(task, recovered));
        return;
      }
      planner.onError(task.taskId, now);
      pollAnswerLost(o, task, started, now, error instanceof TimeoutError ? 'timeout' : 'connection', error);
    } else if (action.kind === 'rate-limited') {
      // The task stays due: its next poll waits in the budget gate, which paused every request.
    } else if (action.kind === 'unauthorized') {
      effects.setAuthorized(false, error);
      planner.postpone(task.taskId, now + o.unauthorizedRetryMs);
      for (const t of planner.tasks) planner.postpone(t.taskId, now + o.unauthorizedRetryMs);
    } else {
      logger.warn({ taskKey: task.key, err: error as Error }, 'poll failed; backing off');
      planner.onError(task.taskId, now);
    }
    return;
  }
  const now = clock.monotonic();
  effects.setAuthorized(true);
  if (!execution) {
    told(o, task, 'empty', now - started);
    planner.onEmpty(task.taskId, now);
    return;
  }
  told(o, task, 'hit', now - started, execution);
  planner.onHit(task.taskId, now, arrivedAt(o, execution), jobIdOf(execution));
  effects.track(o.dispatch(task, execution));
}

/**
 * Where the execution's createdAt falls on the local monotonic clock, through the service's clock as its
 * answers' Date headers tell it: the local wall clock may be minutes off the service's. Only when no answer
 * carried a Date (an in-process emulator) is it read against the local wall clock.
 */
function arrivedAt(o: SchedulerOptions, execution: TaskExecution): number | undefined {
  const createdAt = Date.parse(execution.createdAt);
  if (!Number.isFinite(createdAt)) return undefined;
  const { client, clock } = o;
  return (
    client.serviceClock.monotonicAt(createdAt) ?? Math.min(clock.monotonic(), monotonicAt(clock, createdAt))
  );
}

/**
 * A poll answer cut short may have named its execution before it was cut: read it back by id, and it is
 * run as if the answer had come whole. Undefined when the answer named none, the read fails, or the
 * execution is no longer this task's to run.
 */
async function readBackCutClaim(
  o: SchedulerOptions,
  task: PolledTask,
  error: NetworkError,
): Promise<TaskExecution | undefined> {
  const prefix = error.answerPrefix;
  const id = prefix === undefined ? undefined : topLevelString(prefix, 'id');
  if (id === undefined) return undefined;
  const logger = o.logger.child({ taskKey: task.key, taskId: task.taskId, executionId: id });
  try {
    const execution = await o.client.getExecution(id, o.cutPolls);
    if (execution.status !== 'IN_PROGRESS' || execution.taskId !== task.taskId) {
      logger.warn(
        { status: execution.status, executionTaskId: execution.taskId },
        'a poll answer cut short named an execution that is not ours to run; leaving it',
      );
      return undefined;
    }
    logger.warn({ err: error }, 'poll answer cut short; its execution was read back by id and runs');
    return execution;
  } catch (readError) {
    logger.error(
      { err: readError as Error },
      'a poll answer cut short named an execution that could not be read back',
    );
    return undefined;
  }
}

function pollAnswerLost(
  o: SchedulerOptions,
  task: PolledTask,
  started: number,
  now: number,
  reason: PollAnswerLoss,
  error: unknown,
): void {
  // Told (and logged: daemon/event-log.ts) with the task and the instants an operator needs to find it.
  o.events?.emit('pollAnswerLost', {
    task: task.key,
    taskId: task.taskId,
    reason,
    polledAt: new Date(started).toISOString(),
    lostAt: new Date(now).toISOString(),
    ...(error instanceof NetworkError && error.answerStatus !== undefined
      ? { answerStatus: error.answerStatus }
      : {}),
    error: lossOf(error),
  });
}

/** What a lost answer's log line and span say of its failure (the error's own fields, no stack). */
function lossOf(error: unknown): WorkerEventMap['pollAnswerLost'][0]['error'] {
  if (!(error instanceof Error)) return { name: 'Error', message: String(error) };
  const { code, phase, sent } = error as { code?: unknown; phase?: unknown; sent?: unknown };
  return {
    name: error.name,
    message: error.message,
    ...(typeof code === 'string' ? { code } : {}),
    ...(typeof phase === 'string' ? { phase } : {}),
    ...(typeof sent === 'boolean' ? { sent } : {}),
  };
}

function told(
  o: SchedulerOptions,
  task: PolledTask,
  result: PollResult,
  durationMs: number,
  claimed?: TaskExecution,
): void {
  o.events?.emit('poll', {
    task: task.key,
    result,
    durationMs,
    ...(claimed ? { claimed: { executionId: claimed.id, createdAt: claimed.createdAt } } : {}),
  });
}
