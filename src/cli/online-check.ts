// `df-worker check --online`: one request to the service (the first page of its tasks, one task long), counted in
// the state folder's budget as the daemon counts its own, to say whether the URL reaches the service, whether the
// key is accepted, and how much of the month's budget is left; and with DF_REDIS_URL, whether Redis answers and
// is set up as clustered mode needs.
import type { ServiceClient } from '../api/client.ts';
import { ServiceClientError, ServiceError } from '../api/errors.ts';
import type { Budget } from '../budget/budget.ts';
import { BudgetExhaustedError } from '../budget/budget.ts';
import { systemClock } from '../clock/clock.ts';
import type { WorkerConfig } from '../config/schema.ts';
import { budgetFromConfig, clientFromConfig } from '../daemon/service-wiring.ts';
import { errorCode } from '../journal/durable-file.ts';
import { JournalUnavailableError } from '../journal/errors.ts';
import { StateFolderLockedError, StateLock } from '../journal/state-lock.ts';

export interface OnlineCheck {
  /** Lines to print, starting with `url:`, `key:` and `budget:` (and `redis:` in clustered mode). */
  lines: string[];
  /** How many of them are problems (the request failed, the key was refused, the folder is unusable). */
  problems: number;
}

/**
 * Sends the one request and describes what came back, then tries Redis when DF_REDIS_URL is set; never throws
 * for what the service, Redis or the network does.
 */
export async function checkOnline(config: WorkerConfig): Promise<OnlineCheck> {
  const service = await checkService(config);
  if (config.cluster.redisUrl === '') return service;
  // Loaded only in clustered mode, as the daemon loads it.
  const { probeRedis } = await import('../cluster/redis-probe.ts');
  const redis = await probeRedis(config.cluster);
  return { lines: [...service.lines, ...redis.lines], problems: service.problems + redis.problems };
}

async function checkService(config: WorkerConfig): Promise<OnlineCheck> {
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
    return await sendOne(config, url);
  } finally {
    await lock.release();
  }
}

async function sendOne(config: WorkerConfig, url: string): Promise<OnlineCheck> {
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
    const answer = await askForOneTask(client, url);
    return { lines: [...answer.lines, budgetLine(budget)], problems: answer.problems };
  } finally {
    await client.close();
    await budget.flush().catch(() => undefined);
  }
}

async function askForOneTask(client: ServiceClient, url: string): Promise<OnlineCheck> {
  try {
    const page = await client.listTasksPage(0, 1);
    return {
      lines: [
        `url: ${url} (the service answered; ${page.totalElements} ${page.totalElements === 1 ? 'task' : 'tasks'} there)`,
        'key: valid',
      ],
      problems: 0,
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
          ? '; the service is not at this URL: check its path in DF_API_URL (df-worker adds /v1/data-factory itself)'
          : '';
      return { lines: [`url: ${url}: ${error.message}${hint}`, 'key: unknown'], problems: 1 };
    }
    if (error instanceof ServiceClientError || error instanceof BudgetExhaustedError) {
      return { lines: [`url: ${url}: ${error.message}`, 'key: unknown (no answer)'], problems: 1 };
    }
    throw error;
  }
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
