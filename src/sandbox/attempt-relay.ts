// What a worker sends about its attempt, brought into the daemon's terms: its outcome and errors rebuilt and
// redacted, its log lines written with the attempt's logger, its ctx.service calls made with the handlers'
// client and answered, its spans given to the attempt's trace.
import type { Logger } from 'pino';
import { pino } from 'pino';
import type { HostResult } from '../runner/attempt-host.ts';
import { NonRetryableError } from '../handlers/define-task.ts';
import { redactDeep, type Redact } from '../secrets/redact.ts';
import { toErrorRecord } from '../api/error-record.ts';
import { performServiceCall, ServiceCallRefusedError, type ServiceCall } from '../handlers/task-service.ts';
import type { HandlerPoolOptions } from './pool-options.ts';
import { markReady, type PoolWorker } from './pool-worker.ts';
import { ATTEMPT_BINDING, type FromWorker, type SerializedError, type WorkerOutcome } from './protocol.ts';

export function hostResult(outcome: WorkerOutcome, redact: Redact): HostResult {
  switch (outcome.kind) {
    case 'returned':
      return { kind: 'returned', value: outcome.output };
    case 'unusable':
      return outcome;
    case 'threw':
      return { kind: 'threw', error: rebuildError(outcome.error, redact) };
  }
}

/** An Error standing for the one thrown in the worker: its name, message and stack, redacted. */
export function rebuildError(serialized: SerializedError, redact: Redact): Error {
  const message = redact(serialized.message);
  const error = serialized.nonRetryable ? new NonRetryableError(message) : new Error(message);
  error.name = serialized.name;
  if (serialized.stack !== undefined) error.stack = redact(serialized.stack);
  else delete error.stack;
  return error;
}

/**
 * Performs a `ctx.service` call of the attempt running on `worker` with the handlers' client, and sends its
 * answer back. A call from an attempt that is no longer running (or was aborted) is refused unsent.
 */
export async function answerServiceCall(
  worker: PoolWorker,
  attemptId: number,
  callId: number,
  call: ServiceCall,
): Promise<void> {
  const running = worker.current;
  let answer: { ok: true; value: unknown } | { ok: false; error: ReturnType<typeof toErrorRecord> };
  try {
    if (running?.attemptId !== attemptId || running.aborted || running.signal.aborted) {
      throw new ServiceCallRefusedError(
        `ctx.service ${call.operation} was not sent: its attempt has ended or was aborted`,
      );
    }
    const client = running.spec.service;
    if (client === undefined) {
      throw new ServiceCallRefusedError(
        `ctx.service ${call.operation} was not sent: no service is set up for this worker`,
      );
    }
    answer = { ok: true, value: await performServiceCall(client, call, running.signal) };
  } catch (error) {
    answer = { ok: false, error: toErrorRecord(error) };
  }
  if (!worker.gone) worker.channel.send({ type: 'service-result', callId, ...answer });
}

/**
 * Writes a line the handler logged through ctx.logger with its attempt's logger, redacted; a line of an
 * attempt that has ended goes to the pool's `logger`, marked `afterAttempt`.
 */
export function relayLog(worker: PoolWorker, line: string, logger: Logger, redact: Redact): void {
  let record: Record<string, unknown>;
  try {
    record = JSON.parse(line) as Record<string, unknown>;
  } catch {
    return;
  }
  const { level, msg, [ATTEMPT_BINDING]: attemptId, ...fields } = record;
  const running = worker.current?.attemptId === attemptId ? worker.current : undefined;
  const target =
    running?.spec.logger ?? logger.child({ executionId: worker.lastExecutionId, afterAttempt: true });
  const label = typeof level === 'number' ? pino.levels.labels[level] : undefined;
  const write = label === undefined ? target.info : target[label as pino.Level];
  const writeLine = () =>
    write.call(target, redactDeep(fields, redact), redact(typeof msg === 'string' ? msg : ''));
  // In the attempt's trace context, when traced: the line then carries its trace_id and span_id.
  const inContext = running?.spec.trace?.run;
  if (inContext) inContext(writeLine);
  else writeLine();
}

/**
 * Acts on any message of a worker but its attempt's result (which the pool settles): a ctx.service call, a log
 * line, an error of stray handler code, a call of process.exit, finished spans, a span's update, its start.
 */
export function relayMessage(
  worker: PoolWorker,
  message: Exclude<FromWorker, { type: 'result' }>,
  options: Pick<HandlerPoolOptions, 'isolation' | 'logger' | 'redact'>,
): void {
  switch (message.type) {
    case 'service-call':
      void answerServiceCall(worker, message.attemptId, message.callId, message);
      return;
    case 'log':
      relayLog(worker, message.line, options.logger, options.redact);
      return;
    case 'stray': {
      const err = rebuildError(message.error, options.redact);
      options.logger.error(
        { executionId: message.executionId, origin: message.origin, err },
        message.afterAttempt
          ? `handler code failed after its attempt ended (${message.origin}); the outcome already taken stands`
          : `handler code failed outside any attempt (${message.origin})`,
      );
      return;
    }
    case 'exit-called':
      worker.exitCode = message.code;
      return;
    case 'spans':
      // A span that ended after its attempt (a promise the handler left running) still belongs to that trace.
      (worker.current?.spec.trace ?? worker.lastTrace)?.ingest?.(message.spans);
      return;
    case 'span-update':
      if (worker.current?.attemptId === message.attemptId)
        worker.current.spec.trace?.update?.(message.update);
      return;
    case 'ready':
      markReady(worker, options.isolation);
      return;
  }
}
