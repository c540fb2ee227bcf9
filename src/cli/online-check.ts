// `df-worker check --online`: the service's task list (one request per 1,000 tasks), counted in the state folder's
// budget as the daemon counts its own, to say whether the URL reaches the service, whether the key is accepted,
// whether every handler's task is there, and how much of the month's budget is left; and with DF_REDIS_URL,
// whether Redis answers and is set up as clustered mode needs.
import type { ServiceClient } from '../api/client.ts';
import type { Task } from '../api/types.ts';
import { taskFitWarnings, type HandlerLimits } from '../daemon/task-fit.ts';
import { ServiceClientError, ServiceError } from '../api/errors.ts';
import type { Budget } from '../budget/budget.ts';
import { BudgetExhaustedError } from '../budget/budget.ts';
import { systemClock } from '../clock/clock.ts';
import type { WorkerConfig } from '../config/schema.ts';
import { budgetFromConfig, clientFromConfig } from '../daemon/service-wiring.ts';
import { nearestName } from '../errors/nearest-name.ts';
import { errorCode } from '../journal/durable-file.ts';
import { JournalUnavailableError } from '../journal/errors.ts';
import { StateFolderLockedError, StateLock } from '../journal/state-lock.ts';
import { cliCommand } from './invocation.ts';

export interface OnlineCheck {
  /** Lines to print, starting with `url:`, `key:`, `tasks:` and `budget:` (and `redis:` in clustered mode). */
  lines: string[];
  /**
   * How many problems they name (the request failed, the key was refused, a handler has no task, the folder
   * is unusable).
   */
  problems: number;
}

/** A loaded handler, as the task check names it: its task key and its file. */
export interface HandlerToCheck extends HandlerLimits {
  key: string;
  file: string;
}

/**
 * Lists the service's tasks and describes what came back, each handler's task among it, then tries Redis when
 * DF_REDIS_URL is set; never throws for what the service, Redis or the network does.
 */
export async function checkOnline(
  config: WorkerConfig,
  handlers: readonly HandlerToCheck[] = [],
): Promise<OnlineCheck> {
  const service = await checkService(config, handlers);
  if (config.cluster.redisUrl === '') return service;
  // Loaded only in clustered mode, as the daemon loads it.
  const { probeRedis } = await import('../clustered/redis-probe.ts');
  const redis = await probeRedis(config.cluster);
  return { lines: [...service.lines, ...redis.lines], problems: service.problems + redis.problems };
}

async function checkService(config: WorkerConfig, handlers: readonly HandlerToCheck[]): Promise<OnlineCheck> {
  // The configuration refuses a URL with credentials or a query, so it can be shown as it is.
  const url = config.api.url;
  let lock: StateLock | undefined;
  try {
    lock = await StateLock.acquire(config.state.dir);
  } catch (error) {
    if (error instanceof StateFolderLockedError) {
      // The running worker counts this key's requests; one sent beside it would be counted by neither.
      const budget = budgetFromConfig(config, systemClock);
      await budget.load().catch(() => undefined);
      return {
        lines: [
          `url: ${url} (not tried: ${error.message}; its /readyz says whether it reaches the service)`,
          'key: not tried',
          'tasks: not checked',
          `budget: ${describeMonth(budget)} (as the running worker last saved it)`,
        ],
        problems: 0,
      };
    }
    if (error instanceof JournalUnavailableError) {
      return { lines: [`url: ${url} (not tried)`, stateFolderProblem(config, error.cause)], problems: 1 };
    }
    throw error;
  }
  try {
    return await askService(config, url, handlers);
  } finally {
    await lock.release();
  }
}

async function askService(
  config: WorkerConfig,
  url: string,
  handlers: readonly HandlerToCheck[],
): Promise<OnlineCheck> {
  const budget = budgetFromConfig(config, systemClock);
  try {
    await budget.load();
  } catch (error) {
    return { lines: [`url: ${url} (not tried)`, stateFolderProblem(config, error)], problems: 1 };
  }
  const client = clientFromConfig(config, budget);
  try {
    if (budget.month().remaining < 1) {
      return {
        lines: [`url: ${url} (not tried: no request left this month)`, 'key: not tried', budgetLine(budget)],
        problems: 1,
      };
    }
    const answer = await askForTasks(client, url, handlers, config.handlers.timeoutMs);
    return { lines: [...answer.lines, budgetLine(budget)], problems: answer.problems };
  } finally {
    await client.close();
    await budget.flush().catch(() => undefined);
  }
}

async function askForTasks(
  client: ServiceClient,
  url: string,
  handlers: readonly HandlerToCheck[],
  defaultTimeoutMs: number,
): Promise<OnlineCheck> {
  try {
    const tasks = await client.listTasks();
    const matched = checkTasks(tasks, handlers);
    return {
      lines: [
        `url: ${url} (the service answered; ${tasks.length} ${tasks.length === 1 ? 'task' : 'tasks'} there)`,
        'key: valid',
        ...matched.lines,
        ...fitLines(tasks, handlers, defaultTimeoutMs),
        pathsLine(client),
      ],
      problems: matched.problems,
    };
  } catch (error) {
    if (error instanceof ServiceError && (error.status === 401 || error.status === 403)) {
      return {
        lines: [
          `url: ${url} (the service answered)`,
          `key: invalid: ${error.message}; check DF_API_KEY (or the file DF_API_KEY_FILE names)`,
        ],
        problems: 1,
      };
    }
    if (error instanceof ServiceError) {
      const hint =
        error.status === 404
          ? '; the service is not at this URL: check its path in DF_API_URL (df-worker adds /v1/data_factory itself)'
          : '';
      return { lines: [`url: ${url}: ${error.message}${hint}`, 'key: unknown'], problems: 1 };
    }
    if (error instanceof ServiceClientError || error instanceof BudgetExhaustedError) {
      return { lines: [`url: ${url}: ${error.message}`, 'key: unknown (no answer)'], problems: 1 };
    }
    throw error;
  }
}

/** A warning line per way a handler's declarations do not fit its task's limits on the service. */
function fitLines(
  tasks: readonly Task[],
  handlers: readonly HandlerToCheck[],
  defaultTimeoutMs: number,
): string[] {
  const byKey = new Map(tasks.map((task) => [task.key, task]));
  return handlers.flatMap((handler) => {
    const task = byKey.get(handler.key);
    if (!task) return [];
    return taskFitWarnings(task, handler, defaultTimeoutMs).map(
      (warning) => `  warning: ${handler.file}: ${warning.message}`,
    );
  });
}

function pathsLine(client: ServiceClient): string {
  const found = client.pathStyleFound;
  const style = found?.style ?? client.toJSON().pathStyle;
  const example = style === 'underscore' ? '/v1/data_factory/tasks' : '/v1/data-factory/tasks';
  const how = found
    ? `found by DF_API_PATH_STYLE=auto, tried ${found.tried.join(' then ')}`
    : `DF_API_PATH_STYLE=${style}`;
  return `paths: ${style} (${example}; ${how})`;
}

/**
 * A `tasks:` line, then one line per handler whose key no task on the service has: its file, its key, the
 * nearest task key that no handler serves (a misspelling on one side or the other), and the fix.
 */
export function checkTasks(tasks: readonly Task[], handlers: readonly HandlerToCheck[]): OnlineCheck {
  const keys = new Set(tasks.map((task) => task.key));
  const missing = handlers.filter((handler) => !keys.has(handler.key));
  const served = handlers.length - missing.length;
  const head = `tasks: ${served} of ${handlers.length} ${handlers.length === 1 ? 'handler has its' : 'handlers have their'} task on the service`;
  if (missing.length === 0) return { lines: [head], problems: 0 };
  const handled = new Set(handlers.map((handler) => handler.key));
  const unserved = [...keys].filter((key) => !handled.has(key));
  const sync = cliCommand('tasks sync');
  return {
    lines: [
      `${head}; ${missing.length} without (create them with \`${sync}\`)`,
      ...missing.map(({ key, file }) => {
        const nearest = nearestName(key, unserved);
        const guess =
          nearest === undefined ? '' : `; did you mean ${nearest}? (then correct the handler's key)`;
        return `  ${file}: no task on the service has the key "${key}"${guess}; create it with \`${sync}\``;
      }),
    ],
    problems: missing.length,
  };
}

function budgetLine(budget: Budget): string {
  return `budget: ${describeMonth(budget)}; at most ${budget.limits.perSecond}/s and ${budget.limits.perMinute}/min`;
}

function describeMonth(budget: Budget): string {
  const month = budget.month();
  return (
    `${month.used} of ${month.limit} requests used in ${month.key}, ${month.remaining} left until ` +
    `${new Date(month.endsAt).toISOString()} (DF_BUDGET_PER_MONTH)`
  );
}

function stateFolderProblem(config: WorkerConfig, error: unknown): string {
  const reason = errorCode(error) ?? (error as Error).message;
  return (
    `budget: cannot use the state folder ${config.state.dir} (${reason}); ` +
    'make it writable or set DF_STATE_DIR to a writable folder'
  );
}
