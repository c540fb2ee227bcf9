// The service's task list as the daemon keeps it: read once at start (retried until the service answers; a
// refused key stops the start), then again now and then, each time matched to the handlers and handed to the
// poll planner. Shared by the standalone and the clustered wiring.
import type { Logger } from 'pino';
import { ServiceError } from '../api/errors.ts';
import { PathStyleError } from '../api/path-style.ts';
import { backoffDelayMs } from '../clock/backoff.ts';
import type { Clock } from '../clock/clock.ts';
import type { WorkerConfig } from '../config/schema.ts';
import type { ErrorCode } from '../errors/catalogue.ts';
import type { PollPlanner } from '../scheduler/poll-planner.ts';
import { classifyFailure } from '../reports/retry-policy.ts';
import type { WorkerEvents } from '../events/worker-events.ts';
import { backoffFromConfig } from './service-wiring.ts';
import { taskRefreshIntervalMs } from './task-refresh.ts';
import { taskFitWarnings } from './task-fit.ts';
import type { TaskMatch, TaskRegistry } from './task-registry.ts';

/** start() refused to run: the message says what to fix. The CLI exits non-zero with it. */
export class StartupError extends Error {
  readonly code: ErrorCode = 'DFW_STARTUP_FAILED';

  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'StartupError';
  }
}

export interface TaskListOptions {
  registry: TaskRegistry;
  config: WorkerConfig;
  logger: Logger;
  clock: Clock;
  /** Each task list read and matched is emitted as 'tasks'. */
  events: WorkerEvents;
  /**
   * Runs each read of the list alone among the daemons sharing the key (clustered mode with DF_TASK_SYNC, so
   * that two replicas do not both create a missing task). Default: as it is.
   */
  exclusive?: <T>(read: () => Promise<T>) => Promise<T>;
}

export class TaskList {
  readonly #o: TaskListOptions;
  #planner: PollPlanner | undefined;
  /** Every handler has its task on the service (the task list is then refreshed less often). */
  #everyHandlerServed = false;
  /** Handler keys with no task on the service, as of the last task list. */
  #withoutTask: string[] = [];
  #answered = false;

  constructor(options: TaskListOptions) {
    this.#o = options;
  }

  /** True once the service has answered a task list. */
  get answered(): boolean {
    return this.#answered;
  }

  get everyHandlerServed(): boolean {
    return this.#everyHandlerServed;
  }

  get withoutTask(): string[] {
    return [...this.#withoutTask];
  }

  /** From now on each task list is handed to `planner` too (at once with the current one). */
  plan(planner: PollPlanner): void {
    this.#planner = planner;
    this.#planTasks();
  }

  /** Reads the list again now (df-worker dev, after the handlers changed). */
  async refresh(signal: AbortSignal): Promise<void> {
    this.#apply(await this.#read(signal));
  }

  #read(signal: AbortSignal): Promise<TaskMatch> {
    const read = () => this.#o.registry.refresh(signal);
    return this.#o.exclusive ? this.#o.exclusive(read) : read();
  }

  /** The first task list: retried until the service answers; a refused key or a permanent error throws. */
  async first(signal: AbortSignal): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        const match = await this.#read(signal);
        this.#answered = true;
        this.#apply(match);
        this.#warnOfUnfitHandlers(match);
        if (match.registered.length === 0) {
          this.#o.logger.warn(
            { handlers: [...match.missing] },
            'no task on the service matches a handler; nothing will be polled until one does',
          );
        }
        return;
      } catch (error) {
        const action = classifyFailure(error);
        // Its own code and message name DF_API_URL and DF_API_PATH_STYLE: retrying cannot find a third spelling.
        if (error instanceof PathStyleError) throw error;
        if (error instanceof ServiceError && (error.status === 401 || error.status === 403)) {
          throw new StartupError(
            error.status === 401
              ? 'the service refused the API key (401 UNAUTHENTICATED): check DF_API_KEY or DF_API_KEY_FILE'
              : 'the API key lacks permission to list tasks (403)',
            { cause: error },
          );
        }
        if (action.kind === 'permanent') {
          throw new StartupError(`could not list the service's tasks: ${(error as Error).message}`, {
            cause: error,
          });
        }
        // After a 429 the budget gate holds the retry until its pause ends.
        const waitMs =
          action.kind === 'rate-limited' ? 0 : backoffDelayMs(attempt, backoffFromConfig(this.#o.config));
        this.#o.logger.warn(
          { err: error as Error, attempt, retryInMs: waitMs },
          'could not list the service tasks yet; retrying',
        );
        await this.#o.clock.sleep(waitMs, signal);
      }
    }
  }

  /** Reads the list again at DF_TASK_REFRESH_MS (less often once every handler is served) until `signal`. */
  async refreshLoop(signal: AbortSignal): Promise<void> {
    const { config, clock, logger } = this.#o;
    while (!signal.aborted) {
      try {
        const overloaded = this.#planner?.overloaded(clock.monotonic()) ?? false;
        await clock.sleep(taskRefreshIntervalMs(config, this.#everyHandlerServed, overloaded), signal);
        await this.refresh(signal);
      } catch (error) {
        if (signal.aborted) return;
        logger.warn({ err: error as Error }, 'task list refresh failed; keeping the current tasks');
      }
    }
  }

  /** Warns when task list refreshes would take more than a tenth of the month. */
  warnOfCostlyRefresh(): void {
    const config = this.#o.config;
    const refreshesPerMonth = (30 * 86_400_000) / config.scheduler.taskRefreshMs;
    if (!this.#everyHandlerServed && refreshesPerMonth > config.budget.perMonth / 10) {
      // Each refresh lists the tasks (a request per page of 1,000) against the same monthly budget.
      this.#o.logger.warn(
        { taskRefreshMs: config.scheduler.taskRefreshMs, refreshesPerMonth: Math.round(refreshesPerMonth) },
        "DF_TASK_REFRESH_MS makes task list refreshes take more than a tenth of the month's budget while a " +
          'handler has no task; polls get less of it (the default, 1 hour, takes 720 requests a month)',
      );
    }
  }

  /** At start: each way a handler's timeouts or concurrency do not fit its task's limits on the service. */
  #warnOfUnfitHandlers(match: TaskMatch): void {
    for (const { task, handler } of match.registered) {
      const { concurrency } = handler as { concurrency?: unknown };
      const limits = { timeoutMs: handler.timeoutMs, concurrency };
      for (const warning of taskFitWarnings(task, limits, this.#o.config.handlers.timeoutMs)) {
        const { field, serviceValue, handlerValue } = warning;
        this.#o.logger.warn({ taskKey: task.key, field, serviceValue, handlerValue }, warning.message);
      }
    }
  }

  #apply(match: TaskMatch): void {
    this.#everyHandlerServed = match.missing.length === 0;
    this.#planTasks();
    this.#withoutTask = match.missing;
    this.#o.events.emit('tasks', {
      served: match.registered.map((r) => r.task.key),
      withoutTask: match.missing,
    });
  }

  #planTasks(): void {
    const planner = this.#planner;
    if (!planner) return;
    const { clock, config, logger } = this.#o;
    const tasks = this.#o.registry.tasks.map((r) => ({ id: r.task.id, key: r.task.key }));
    planner.setTasks(tasks, clock.monotonic());
    if (tasks.length > 0 && planner.paceExceedsMaxInterval(clock.monotonic())) {
      logger.warn(
        {
          tasks: tasks.length,
          idleIntervalSeconds: Math.round(planner.idleIntervalMs(clock.monotonic()) / 1000),
          maxPollIntervalSeconds: Math.round(config.scheduler.maxPollIntervalMs / 1000),
        },
        "the month's budget cannot poll every task within DF_MAX_POLL_INTERVAL_MS; the budget wins " +
          '(raise DF_BUDGET_PER_MONTH, serve fewer tasks, or raise the interval)',
      );
    }
  }
}
