// What the poll loop runs on (see Scheduler): the tasks it polls and the parts it is given. Apart from the loop so
// that one poll's code (poll-once.ts) reads them without importing the loop that calls it.
import type { Logger } from 'pino';
import type { ServiceClient } from '../api/client.ts';
import type { TaskExecution } from '../api/types.ts';
import type { Clock } from '../clock/clock.ts';
import type { WorkerEvents } from '../events/worker-events.ts';
import type { PollPlanner } from './poll-planner.ts';

export interface PolledTask {
  taskId: string;
  key: string;
}

export interface SchedulerOptions {
  /** The client, whose budget gate paces every poll and pauses them all after a 429. */
  client: ServiceClient;
  planner: PollPlanner;
  clock: Clock;
  logger: Logger;
  /**
   * Executions run at once. A poll in flight holds a slot too (its answer may be an execution to run), so
   * polls of different tasks go out side by side, each on its own connection, and one slow answer holds back
   * only its own task.
   */
  concurrency: number;
  /**
   * A task's own limit on the slots it holds (defineTask `concurrency`), or undefined for none: a task at its
   * limit is not polled until one of its executions ends. Default: none for every task.
   */
  taskConcurrency?: (task: PolledTask) => number | undefined;
  /**
   * Keeps the last free slot from a task that holds its fair share while other tasks are served (see
   * slot-share.ts), so a flood of one task cannot hold every slot. Default true; false restores the shared
   * pool of before (bench:fairness's baseline).
   */
  fairShare?: boolean;
  /**
   * Where the slots are counted when they are not this loop's own (clustered mode: the executions queued or
   * running in Redis, as of the coordinator's last look), for taskConcurrency and the fair share. Default:
   * this loop's executions and polls, against `concurrency`.
   */
  slotView?: () => SlotView;
  /**
   * A task was left unpolled for want of a slot it may take (see slotView): whoever keeps the view looks
   * again and calls recheck(). Called on each such decision.
   */
  onHeldBack?: () => void;
  /**
   * Aborts the polls already sent, whose answers are then lost (counted, reason `shutdown`): the daemon's last
   * word at shutdown, when waiting longer for an answer would overrun the documented bound. Until then a sent
   * poll runs to its answer or DF_API_ANSWER_TIMEOUT_MS, since the service claims the execution when it answers.
   */
  cutPolls?: AbortSignal;
  /** While the key is refused (401), one poll is tried this often, in ms. */
  unauthorizedRetryMs: number;
  /** Why no execution may be claimed right now (e.g. the journal is not writable), or undefined. */
  claimBlocker?: () => string | undefined;
  /** Runs one claimed execution to its end (journal, handler, report). Must not reject. */
  dispatch: (task: PolledTask, execution: TaskExecution) => Promise<void>;
  /**
   * Reports FAILED an execution a poll claimed whose answer cannot be run (e.g. `input` not an object),
   * so its job does not wait forever. Must not reject. Without it, such an answer is only logged.
   */
  failUnreadable?: (task: PolledTask, executionId: string, problem: string) => Promise<void>;
  /**
   * Where each poll's result is told ('poll'), and each poll whose answer was lost after it left
   * ('pollAnswerLost': the service may have claimed an execution for this worker that no one will run or
   * report; told after it is logged). Default: none.
   */
  events?: WorkerEvents;
  onAuthorizationChange?: (authorized: boolean) => void;
  /**
   * Called whenever the count of executions owed a report changes: those running (or being reported) and
   * those waiting for a slot. The budget's report reserve follows it (see reportReserveFor).
   */
  onReportsOwed?: (owed: number) => void;
}

/** Slots counted elsewhere (see SchedulerOptions.slotView). */
export interface SlotView {
  busy: number;
  concurrency: number;
  held(taskId: string): number;
}
