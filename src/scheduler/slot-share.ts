// Which task may take a free handler slot: its own `concurrency` (defineTask) first, then a reserve that keeps
// one slot free for the other tasks once a task holds its fair share. The scheduler asks it before each poll.
//
// Why a reserve and not a rotation (round robin, deficit round robin): work on the service is only seen by
// polling, and a running handler is never pre-empted, so a task's pickup can only be fast if a slot is free
// when its work arrives. A rotation shares slots among tasks that are known to have work; a rare task never
// looks busy, and would wait for a flooded task's handler to end (30 s in bench:fairness). A reserve of one
// slot bounds the rare task's pickup by its poll interval; the flooded task pays one slot of DF_CONCURRENCY
// while the others are idle (none when it is served alone).

export interface SlotClaim {
  /** Slots taken by every task (executions running, polls out, journal replays). */
  busy: number;
  /** DF_CONCURRENCY. */
  concurrency: number;
  /** Tasks served (polled). */
  tasks: number;
  /** Slots this task holds: its executions running and its poll out. */
  held: number;
  /** The task's own limit (defineTask `concurrency`); undefined for none. */
  taskLimit: number | undefined;
  /** False restores the shared pool of before (bench:fairness's baseline): only the task's own limit holds. */
  fair: boolean;
}

/**
 * The slots a task may hold beside others before the last free one is kept from it: DF_CONCURRENCY shared out
 * evenly, at least one.
 */
export function fairShare(concurrency: number, tasks: number): number {
  return Math.max(1, Math.floor(concurrency / Math.max(1, tasks)));
}

/** True when the task may take one more slot now (a poll, then the execution it claims). */
export function mayTakeSlot(claim: SlotClaim): boolean {
  const { busy, concurrency, tasks, held, taskLimit, fair } = claim;
  if (busy >= concurrency) return false;
  if (taskLimit !== undefined && held >= taskLimit) return false;
  if (!fair || tasks <= 1) return true;
  // The last free slot goes only to a task below its fair share: the others can always start one at once.
  const freeAfter = concurrency - busy - 1;
  return freeAfter >= 1 || held < fairShare(concurrency, tasks);
}
