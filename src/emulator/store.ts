// The emulator's in-memory state: tasks and their executions, with the service's rules for claiming (poll),
// timing out and reporting them. The service's other resources (files, variables, jobs) keep their own stores,
// held here so that one reset clears everything.
import type { Clock } from '../clock/clock.ts';
import type {
  JobContext,
  JsonObject,
  ListEnvelope,
  ReportStatus,
  Task,
  TaskExecution,
} from '../api/types.ts';
import { extraFieldsOf } from '../api/validate.ts';
import { parseTaskDefinition } from './bodies.ts';
import { FileStore } from './file-store.ts';
import { JobStore } from './job-store.ts';
import { ClaimDeadlines, type ClaimTimeout, type DueClaim } from './response-timeouts.ts';
import type { EmulatedExecution } from './types.ts';
import { VariableStore } from './variable-store.ts';

export class Store {
  readonly #clock: Clock;
  /** Uploaded file records. */
  readonly files: FileStore;
  /** Variables with their versions. */
  readonly variables: VariableStore;
  /** Jobs and job executions (runs). */
  readonly jobs: JobStore;
  // Maps keep insertion order, which is creation order: lists and polls rely on it.
  #tasks = new Map<string, Task>();
  #executions = new Map<string, EmulatedExecution>();
  /**
   * Each task's executions not yet handed out, oldest first, from `head` on: a poll takes the first still
   * pending in O(1) (a month replay polls 40,000 times over 20,000 executions).
   */
  #unclaimed = new Map<string, { queue: EmulatedExecution[]; head: number }>();
  #sequence = { task: 0, execution: 0 };
  readonly #deadlines = new ClaimDeadlines();
  readonly #timeoutOf: (task: Task) => ClaimTimeout | undefined;

  /** `timeoutOf`: the response timeout a claim of the task runs under (none by default). */
  constructor(clock: Clock, timeoutOf: (task: Task) => ClaimTimeout | undefined = () => undefined) {
    this.#clock = clock;
    this.#timeoutOf = timeoutOf;
    this.files = new FileStore(clock);
    this.variables = new VariableStore(clock);
    this.jobs = new JobStore(clock);
  }

  /** Fields beyond the documented ones (Conductor's `timeoutSeconds`...) are stored and answered as sent. */
  createTask(definition: unknown): Task {
    const valid = parseTaskDefinition(definition);
    const task = {
      ...extraTaskFields(definition),
      object: 'task',
      id: `task-${++this.#sequence.task}`,
      createdAt: this.#isoNow(),
      ...valid,
    } as Task;
    this.#tasks.set(task.id, task);
    return task;
  }

  /**
   * Replaces the task's definition, as a PUT does: extra fields the body lacks are gone, as a service resets
   * what an update leaves out; undefined when no task has this id.
   */
  updateTask(id: string, definition: unknown): Task | undefined {
    const existing = this.#tasks.get(id);
    if (!existing) return undefined;
    const valid = parseTaskDefinition(definition);
    const task = {
      ...extraTaskFields(definition),
      object: 'task',
      id,
      createdAt: existing.createdAt,
      ...valid,
      updatedAt: this.#isoNow(),
    } as Task;
    this.#tasks.set(id, task);
    return task;
  }

  /** Executions of a deleted task stay, as history for tests; its poll answers 404. */
  deleteTask(id: string): boolean {
    return this.#tasks.delete(id);
  }

  getTask(id: string): Task | undefined {
    return this.#tasks.get(id);
  }

  /** By id first, then by key; with duplicate keys the oldest task wins. */
  findTask(idOrKey: string): Task | undefined {
    return this.#tasks.get(idOrKey) ?? [...this.#tasks.values()].find((task) => task.key === idOrKey);
  }

  listTasks(page: number, size: number): ListEnvelope<Task> {
    const all = [...this.#tasks.values()];
    return { object: 'list', data: all.slice(page * size, (page + 1) * size), totalElements: all.length };
  }

  enqueueExecution(task: Task, input: JsonObject = {}, context?: JobContext): EmulatedExecution {
    const number = ++this.#sequence.execution;
    return this.#queue({
      object: 'task_execution',
      id: `execution-${number}`,
      taskId: task.id,
      taskKey: task.key,
      createdAt: this.#isoNow(),
      status: 'IN_PROGRESS',
      // The service adds the job context to every input; it is not one of the task's input keys.
      input: { ...input, context: context ?? defaultContext(number) },
      reports: [],
    });
  }

  #queue(execution: EmulatedExecution): EmulatedExecution {
    this.#executions.set(execution.id, execution);
    let unclaimed = this.#unclaimed.get(execution.taskId);
    if (!unclaimed) this.#unclaimed.set(execution.taskId, (unclaimed = { queue: [], head: 0 }));
    unclaimed.queue.push(execution);
    return execution;
  }

  /** Hands out the oldest pending execution of the task, once; undefined when none is pending. */
  claimNext(taskId: string): EmulatedExecution | undefined {
    this.#expireClaims();
    const unclaimed = this.#unclaimed.get(taskId);
    if (!unclaimed) return undefined;
    const { queue } = unclaimed;
    // Executions reported before any poll handed them out (a report needs only the id) are skipped.
    while (unclaimed.head < queue.length) {
      const execution = queue[unclaimed.head++]!;
      if (execution.status === 'IN_PROGRESS' && !execution.claimedAt) {
        execution.claimedAt = this.#isoNow();
        this.#compact(unclaimed);
        const task = this.#tasks.get(taskId);
        const timeout = task && this.#timeoutOf(task);
        if (timeout) this.#deadlines.track(execution, this.#clock.now(), timeout);
        return execution;
      }
    }
    this.#compact(unclaimed);
    return undefined;
  }

  /** Lets go of handed-out executions at the queue's front once they are half of it. */
  #compact(unclaimed: { queue: EmulatedExecution[]; head: number }): void {
    if (unclaimed.head > 1024 && unclaimed.head * 2 > unclaimed.queue.length) {
      unclaimed.queue = unclaimed.queue.slice(unclaimed.head);
      unclaimed.head = 0;
    }
  }

  getExecution(id: string): EmulatedExecution | undefined {
    this.#expireClaims();
    return this.#executions.get(id);
  }

  /**
   * Why a report of the execution is refused, or undefined when it is taken: its claim timed out and the
   * execution was queued again. In same-id mode, once a poll claimed it again, a report is the new claim's (no
   * request names the claim it comes from).
   */
  reportRefusal(id: string): string | undefined {
    this.#expireClaims();
    const execution = this.#executions.get(id);
    const last = execution?.timeouts?.at(-1);
    if (!execution || !last) return undefined;
    const lapsed = `Task execution '${id}' was not reported in time (claimed at ${last.claimedAt}, timed out at ${last.at})`;
    if (execution.status === 'TIMED_OUT') {
      return `${lapsed} and was queued again as '${last.requeuedAs}'; a report of it is refused.`;
    }
    if (execution.status === 'IN_PROGRESS' && execution.claimedAt === undefined) {
      return `${lapsed} and is queued again under its id, waiting for a poll to claim it; a report of the lapsed claim is refused.`;
    }
    return undefined;
  }

  /** Times out every claim whose response timeout passed, and queues its execution again. */
  #expireClaims(): void {
    for (const due of this.#deadlines.due(this.#clock.now())) this.#timeOut(due);
  }

  #timeOut({ execution, requeue, dueMs }: DueClaim): void {
    if (execution.status !== 'IN_PROGRESS' || execution.claimedAt === undefined) return;
    const at = new Date(dueMs).toISOString();
    const claimedAt = execution.claimedAt;
    if (requeue === 'same-id') {
      execution.claimedAt = undefined;
      (execution.timeouts ??= []).push({ at, claimedAt, requeuedAs: execution.id });
      this.#queue(execution);
      return;
    }
    const task = this.#tasks.get(execution.taskId);
    const number = ++this.#sequence.execution;
    const copy = this.#queue({
      object: 'task_execution',
      id: `execution-${number}`,
      taskId: execution.taskId,
      taskKey: task?.key ?? execution.taskKey,
      createdAt: at,
      status: 'IN_PROGRESS',
      input: structuredClone(execution.input),
      reports: [],
      requeuedFrom: execution.id,
    });
    execution.status = 'TIMED_OUT';
    execution.updatedAt = at;
    (execution.timeouts ??= []).push({ at, claimedAt, requeuedAs: copy.id });
  }

  /**
   * Stores a report. A report on an already finished execution is accepted and appended too: the
   * service's allowed source states are not documented, and tests must be able to see duplicates.
   */
  report(id: string, status: ReportStatus, output: JsonObject | undefined): EmulatedExecution | undefined {
    this.#expireClaims();
    const execution = this.#executions.get(id);
    if (!execution) return undefined;
    this.#deadlines.settle(id);
    const at = this.#isoNow();
    execution.status = status;
    if (output !== undefined) execution.output = output;
    execution.updatedAt = at;
    execution.reports.push({ at, status, output: output ?? {} });
    return execution;
  }

  executions(): EmulatedExecution[] {
    this.#expireClaims();
    return [...this.#executions.values()];
  }

  /** Drops everything and restarts ids, so a reset emulator answers like a new one. */
  reset(): void {
    this.#tasks.clear();
    this.#executions.clear();
    this.#unclaimed.clear();
    this.#deadlines.clear();
    this.#sequence = { task: 0, execution: 0 };
    this.files.reset();
    this.variables.reset();
    this.jobs.reset();
  }

  #isoNow(): string {
    return new Date(this.#clock.now()).toISOString();
  }
}

/** The execution as the service sends it, without the emulator's bookkeeping. */
export function toWireExecution(
  execution: EmulatedExecution,
): Omit<TaskExecution, 'status'> & { status: EmulatedExecution['status'] } {
  const {
    taskKey: _taskKey,
    claimedAt: _claimedAt,
    reports: _reports,
    timeouts: _timeouts,
    requeuedFrom: _requeuedFrom,
    ...wire
  } = execution;
  return wire;
}

function extraTaskFields(definition: unknown): JsonObject {
  const { id: _id, ...rest } = definition as JsonObject;
  return extraFieldsOf(rest) ?? {};
}

function defaultContext(executionNumber: number): JobContext {
  return {
    jobAccountId: 'emulator-account',
    jobId: `emulator-job-${executionNumber}`,
    userAccountId: 'emulator-account',
    userId: 'emulator-user',
  };
}
