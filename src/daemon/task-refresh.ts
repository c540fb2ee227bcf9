// When the task list (daemon/task-list.ts) is read again: often while a handler still has no task on the
// service, rarely once each has one, since every read is a request the month's polls could have had.
import type { WorkerConfig } from '../config/schema.ts';

/** How often the task list is read again once every handler has its task on the service. */
export const MATCHED_TASK_REFRESH_MS = 24 * 3_600_000;

/** ... and while there is more work than the month can carry, when every request is a claim foregone. */
export const OVERLOADED_TASK_REFRESH_MS = 7 * 24 * 3_600_000;

/**
 * Time until the next task list refresh: DF_TASK_REFRESH_MS while a handler has no task on the service (one
 * may be created any time); once every handler is served, daily, or weekly while the work is more than the
 * month can carry, since each refresh is a request against the month's budget that polls could have had.
 */
export function taskRefreshIntervalMs(
  config: WorkerConfig,
  everyHandlerServed: boolean,
  overloaded = false,
): number {
  const configured = config.scheduler.taskRefreshMs;
  if (!everyHandlerServed) return configured;
  return Math.max(configured, overloaded ? OVERLOADED_TASK_REFRESH_MS : MATCHED_TASK_REFRESH_MS);
}
