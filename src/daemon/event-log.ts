// The log lines that say what the core's events tell: an execution claimed, finished, reported or left for the
// next start, a report retried, a redelivery, a report dropped with a lost lock, a poll answer lost. Written
// from the events, the same way in standalone and clustered mode, rather than beside them in each part. The
// parts emit each of these inside their execution's context (see ExecutionPipeline), so with tracing on a
// line carries its trace. Lines that explain a decision with what only the part holds (an attempt's error and
// stack, a journal write that failed) stay with the part.
import type { Logger } from 'pino';
import type { WorkerEvents } from '../events/worker-events.ts';

export function logEvents(events: WorkerEvents, logger: Logger): void {
  // Executions taken up again from the journal or the queue, until their report ends: their lines say so.
  const resumed = new Set<string>();
  // An execution's bindings, put in each line (no child logger: a line below its level then costs nothing).
  const of = (taskKey: string, executionId: string) => ({
    taskKey,
    executionId,
    ...(resumed.has(executionId) ? { replay: true } : {}),
  });

  events.on('claim', ({ task, executionId, resumed: again }) => {
    if (again) resumed.add(executionId);
    else logger.info(of(task, executionId), 'execution claimed');
  });
  events.on('outcome', ({ task, executionId, outcome }) => {
    logger.info(
      {
        ...of(task, executionId),
        status: outcome.status,
        attempts: outcome.attempts,
        durationMs: outcome.durationMs,
        failure: outcome.failure,
      },
      'execution finished',
    );
  });
  events.on('reportRetry', ({ task, executionId, attempt, retryInMs, rateLimited, error }) => {
    // A 429's retry waits for the pause the budget heard, which is logged once for every request it holds.
    if (rateLimited) return;
    logger.warn(
      {
        ...of(task, executionId),
        attempt,
        retryInMs,
        err: errorOf(error),
      },
      'report failed; retrying',
    );
  });
  events.on('report', ({ task, executionId, result, attempts, status }) => {
    const bindings = of(task, executionId);
    resumed.delete(executionId);
    if (result === 'delivered') {
      logger.info({ ...bindings, status, reportAttempts: attempts }, 'execution reported');
    } else if (result === 'left-in-journal') {
      logger.warn(bindings, 'report not delivered before exit; it stays in the journal for the next start');
    }
  });
  events.on('fenced', ({ request, task, executionId }) => {
    if (request !== 'report' || task === undefined || executionId === undefined) return;
    logger.warn(
      of(task, executionId),
      'this process no longer owns the execution (its lock lapsed during a stall or a partition): dropping ' +
        'its outcome unreported; the replica that took it over reports it',
    );
    resumed.delete(executionId);
  });
  events.on('redelivered', ({ task, executionId, where, jobId, again }) => {
    if (again) return;
    if (where === 'pipeline') {
      logger.warn(
        of(task, executionId),
        'a poll handed out again an execution this worker still owes a report for (the service re-queued it): ' +
          'it is not run again; the claim in hand reports it once',
      );
    } else {
      logger.warn(
        {
          ...of(task, executionId),
          jobId,
        },
        'a poll handed out again an execution whose job is not finished (the service re-queued it): it is not ' +
          'queued again; that job reports it once',
      );
    }
  });
  events.on('pollAnswerLost', ({ task, taskId, reason, polledAt, lostAt, answerStatus, error }) => {
    // Nothing else will name this execution: this worker never learnt its id, and the service API documents no
    // way back from claimed to pending. An operator can find it on the service by task and time.
    logger.error(
      {
        taskKey: task,
        taskId,
        reason,
        polledAt,
        lostAt,
        answerStatus,
        err: errorOf(error),
      },
      'poll answer lost after the poll was sent: the service may hold an execution of this task claimed by ' +
        'this worker between polledAt and lostAt that no one will run or report; look for it on the service',
    );
  });
}

/**
 * An error an event told, as the logger's `err` serializer reads a thrown one: `type` its class name, its
 * message and own fields. It has no stack: the event carries none (the line says where it was logged).
 */
function errorOf({ name, message, ...fields }: { readonly name: string; readonly message: string }): Error {
  const error = Object.assign(new Error(message), fields);
  // The serializer names the type after the constructor; without one, after `name`.
  Object.defineProperties(error, {
    name: { value: name },
    constructor: { value: undefined },
    stack: { value: undefined },
  });
  return error;
}
