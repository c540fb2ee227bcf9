// Which service tasks the daemon serves: the service's task list matched to the loaded handler modules by key.
// A handler with no task is reported (or the task created when sync is on); a task with no handler is left alone.
import type { Logger } from 'pino';
import type { ServiceClient } from '../api/client.ts';
import type { Task, TaskDefinition } from '../api/types.ts';
import { nearestName } from '../errors/nearest-name.ts';
import type { TaskModule } from '../handlers/define-task.ts';

export interface RegisteredTask {
  task: Task;
  handler: TaskModule;
}

export interface TaskMatch {
  registered: RegisteredTask[];
  /** Handler keys with no task on the service. */
  missing: string[];
  /** Task keys on the service with no handler here. */
  unhandled: string[];
}

export function definitionOf(handler: TaskModule): TaskDefinition {
  return {
    key: handler.key,
    description: handler.description,
    retryCount: handler.retryCount,
    inputKeys: handler.inputKeys,
    outputKeys: handler.outputKeys,
  };
}

export function matchTasks(tasks: Task[], handlers: ReadonlyMap<string, TaskModule>): TaskMatch {
  const byKey = new Map<string, Task>();
  for (const t of tasks) if (!byKey.has(t.key)) byKey.set(t.key, t);
  const registered: RegisteredTask[] = [];
  const missing: string[] = [];
  for (const [key, handler] of handlers) {
    const task = byKey.get(key);
    if (task) registered.push({ task, handler });
    else missing.push(key);
  }
  const unhandled = [...byKey.keys()].filter((k) => !handlers.has(k));
  return { registered, missing, unhandled };
}

export class TaskRegistry {
  #byId = new Map<string, RegisteredTask>();
  #handlers: ReadonlyMap<string, TaskModule>;
  readonly #client: ServiceClient;
  readonly #logger: Logger;
  readonly #sync: boolean;
  readonly #syncCommand: string;
  #spellingLogged = false;

  constructor(options: {
    handlers: ReadonlyMap<string, TaskModule>;
    client: ServiceClient;
    logger: Logger;
    sync: boolean;
    /** The command that creates missing tasks, as the user types it. Default: `df-worker tasks sync`. */
    syncCommand?: string;
  }) {
    this.#handlers = options.handlers;
    this.#client = options.client;
    this.#logger = options.logger;
    this.#sync = options.sync;
    this.#syncCommand = options.syncCommand ?? 'df-worker tasks sync';
  }

  get tasks(): RegisteredTask[] {
    return [...this.#byId.values()];
  }

  /** Serves these handlers from the next refresh on (df-worker dev, after the handler files changed). */
  setHandlers(handlers: ReadonlyMap<string, TaskModule>): void {
    this.#handlers = handlers;
  }

  byId(taskId: string): RegisteredTask | undefined {
    return this.#byId.get(taskId);
  }

  /** Lists the service's tasks (every page) and matches them; creates missing ones when sync is on. */
  async refresh(signal?: AbortSignal): Promise<TaskMatch> {
    const tasks = await this.#client.listTasks({ signal });
    this.#logSpelling();
    const match = matchTasks(tasks, this.#handlers);
    if (this.#sync && match.missing.length > 0) {
      for (const key of match.missing) {
        const handler = this.#handlers.get(key)!;
        const created = await this.#client.createTask(definitionOf(handler), signal);
        this.#logger.info(
          { taskKey: key, taskId: created.id },
          'created the task on the service (task sync)',
        );
        match.registered.push({ task: created, handler });
      }
      match.missing = [];
    }
    const before = new Set(this.#byId.keys());
    this.#byId = new Map(match.registered.map((r) => [r.task.id, r]));
    for (const r of match.registered) {
      if (!before.has(r.task.id))
        this.#logger.info({ taskKey: r.task.key, taskId: r.task.id }, 'serving task');
    }
    for (const key of match.missing) this.#warnMissing(key, match.unhandled);
    if (match.unhandled.length > 0) {
      this.#logger.debug(
        { taskKeys: match.unhandled },
        'tasks on the service without a handler here are left alone',
      );
    }
    return match;
  }

  /** Once: the spelling DF_API_PATH_STYLE=auto found with the first task list. */
  #logSpelling(): void {
    const found = this.#client.pathStyleFound;
    if (found === undefined || this.#spellingLogged) return;
    this.#spellingLogged = true;
    this.#logger.info(
      { pathStyle: found.style, tried: found.tried },
      `the service answers the ${found.style} spelling of its paths (DF_API_PATH_STYLE=auto); kept until restart`,
    );
  }

  /** A handler without its task: likely a misspelt key when a task of a close key has no handler. */
  #warnMissing(key: string, unhandled: string[]): void {
    const nearest = nearestName(key, unhandled);
    const handler = this.#handlers.get(key);
    const file = handler !== undefined && 'file' in handler ? handler.file : undefined;
    const fields = {
      taskKey: key,
      ...(typeof file === 'string' ? { file } : {}),
      ...(nearest === undefined ? {} : { nearestTaskKey: nearest }),
    };
    const guess = nearest === undefined ? '' : ` (did you mean ${nearest}? then correct the handler's key)`;
    this.#logger.warn(
      fields,
      `a handler has no task on the service${guess}; create its task with \`${this.#syncCommand}\` ` +
        'or start with DF_TASK_SYNC=true',
    );
  }
}
