// Conductor's response timeout, as the service's task engine applies it: an execution handed out by a poll and
// not reported within the task's response timeout is timed out and queued again, and a later report of the claim
// that lost it is refused. This module keeps the claims' deadlines; the store re-queues what they give back.
import type { Task } from '../api/types.ts';
import type { EmulatedExecution, RequeueMode, ResponseTimeout } from './types.ts';

/** The timeout one claim runs under, with the rule it came from. */
export interface ClaimTimeout {
  /** From the claim (the poll that handed the execution out) to its report, in ms of the emulator's clock. */
  ms: number;
  requeue: RequeueMode;
  /**
   * Asked when the deadline passes: false lets the claim run on (its fault rule was spent or replaced
   * meanwhile), true counts one time-out against the rule.
   */
  spend: () => boolean;
}

/** A claim whose deadline passed and whose rule still applied: the store times it out. */
export interface DueClaim {
  execution: EmulatedExecution;
  requeue: RequeueMode;
  ms: number;
  dueMs: number;
}

interface Deadline extends ClaimTimeout {
  execution: EmulatedExecution;
  dueMs: number;
}

export class ClaimDeadlines {
  // Few claims run at once, so a scan per request costs less than keeping a heap in order.
  readonly #open = new Map<string, Deadline>();

  /** Watches the claim just made of `execution`. */
  track(execution: EmulatedExecution, nowMs: number, timeout: ClaimTimeout): void {
    this.#open.set(execution.id, { ...timeout, execution, dueMs: nowMs + timeout.ms });
  }

  /** The execution was reported in time: its claim is no longer watched. */
  settle(executionId: string): void {
    this.#open.delete(executionId);
  }

  /** Claims whose deadline is at or before `nowMs`, earliest first; each is given back once. */
  due(nowMs: number): DueClaim[] {
    if (this.#open.size === 0) return [];
    const due: Deadline[] = [];
    for (const deadline of this.#open.values()) if (deadline.dueMs <= nowMs) due.push(deadline);
    due.sort((a, b) => a.dueMs - b.dueMs);
    const timedOut: DueClaim[] = [];
    for (const deadline of due) {
      this.#open.delete(deadline.execution.id);
      if (!deadline.spend()) continue;
      const { execution, requeue, ms, dueMs } = deadline;
      timedOut.push({ execution, requeue, ms, dueMs });
    }
    return timedOut;
  }

  clear(): void {
    this.#open.clear();
  }
}

/** The emulator's setting: response timeouts by task id or key (the id wins). */
export class ResponseTimeoutSettings {
  readonly #byTask = new Map<string, ResponseTimeout>();

  constructor(initial: Record<string, ResponseTimeout> = {}) {
    for (const [task, timeout] of Object.entries(initial)) this.set(task, timeout);
  }

  set(taskIdOrKey: string, timeout: ResponseTimeout | undefined): void {
    if (timeout === undefined) {
      this.#byTask.delete(taskIdOrKey);
      return;
    }
    if (!(Number.isFinite(timeout.ms) && timeout.ms > 0)) {
      throw new RangeError(`The response timeout of '${taskIdOrKey}' must be a positive number of ms.`);
    }
    this.#byTask.set(taskIdOrKey, { ...timeout });
  }

  of(task: Task): ClaimTimeout | undefined {
    const timeout = this.#byTask.get(task.id) ?? this.#byTask.get(task.key);
    if (!timeout) return undefined;
    return { ms: timeout.ms, requeue: timeout.requeue ?? 'new-execution', spend: () => true };
  }
}
