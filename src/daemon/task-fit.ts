// Whether a handler's declarations fit the limits the service keeps on its task (a Conductor definition's
// fields, kept in `extraFields`): an execution still running past `responseTimeoutSeconds` or `timeoutSeconds`
// is timed out and rescheduled by the service, and `concurrentExecLimit` caps how many it hands out at once.
// Used by `check --online` and at start, as warnings: the service's own numbers win either way.
import type { Task } from '../api/types.ts';

/** What a handler declares that the service's limits bear on; `concurrency` may be absent from the definition. */
export interface HandlerLimits {
  /** The handler's own attempt deadline, ms; else `defaultTimeoutMs`. */
  timeoutMs?: number | undefined;
  /** Executions of this task run at once, when the handler declares it. */
  concurrency?: unknown;
}

/** One way the handler does not fit its task, with the figures compared. */
export interface FitWarning {
  field: 'responseTimeoutSeconds' | 'timeoutSeconds' | 'concurrentExecLimit';
  serviceValue: number;
  /** The handler's figure the service's is compared with (ms for the timeouts, a count for concurrency). */
  handlerValue: number;
  message: string;
}

/**
 * The warnings for one task and its handler: the longest an execution can take here (every attempt the task's
 * retryCount allows, each to its deadline) past either service timeout, or a declared concurrency above the
 * service's limit. A field the task does not carry is not compared.
 */
export function taskFitWarnings(task: Task, handler: HandlerLimits, defaultTimeoutMs: number): FitWarning[] {
  const warnings: FitWarning[] = [];
  const attemptMs = handler.timeoutMs ?? defaultTimeoutMs;
  const attempts = Math.max(0, Math.floor(task.retryCount)) + 1;
  const executionMs = attempts * attemptMs;
  const source = handler.timeoutMs === undefined ? 'DF_HANDLER_TIMEOUT_MS' : "the handler's timeoutMs";
  for (const field of ['responseTimeoutSeconds', 'timeoutSeconds'] as const) {
    const seconds = positiveNumber(task.extraFields?.[field]);
    if (seconds === undefined || executionMs <= seconds * 1000) continue;
    const span =
      attempts === 1 ? `one attempt of ${attemptMs} ms` : `${attempts} attempts of ${attemptMs} ms`;
    warnings.push({
      field,
      serviceValue: seconds,
      handlerValue: executionMs,
      message:
        `task ${task.key}: ${span} (${source}, retryCount ${task.retryCount}) can run past the service's ` +
        `${field} of ${seconds} s, when it times the execution out and hands it out again; lower the ` +
        `timeout or retryCount, or raise ${field} on the task`,
    });
  }
  const limit = positiveNumber(task.extraFields?.concurrentExecLimit);
  const concurrency = positiveNumber(handler.concurrency);
  if (limit !== undefined && concurrency !== undefined && concurrency > limit) {
    warnings.push({
      field: 'concurrentExecLimit',
      serviceValue: limit,
      handlerValue: concurrency,
      message:
        `task ${task.key}: the handler's concurrency ${concurrency} is above the service's concurrentExecLimit ` +
        `of ${limit}: the service hands out at most ${limit} at once, so the other slots stay idle`,
    });
  }
  return warnings;
}

function positiveNumber(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isFinite(value) && value > 0 ? value : undefined;
}
