// `df-worker tasks sync`: makes the service's custom tasks match what the handlers declare (create the missing,
// update the changed), within the key's request budget. Tasks no handler claims are never touched.
import path from 'node:path';
import type { ServiceClient } from '../../api/client.ts';
import { ServiceClientError, ServiceError } from '../../api/errors.ts';
import type { Task } from '../../api/types.ts';
import type { Budget } from '../../budget/budget.ts';
import { BudgetExhaustedError } from '../../budget/budget.ts';
import { systemClock } from '../../clock/clock.ts';
import { ConfigError } from '../../config/errors.ts';
import { loadConfig } from '../../config/load.ts';
import { describeError } from '../../errors/catalogue.ts';
import type { WorkerConfig } from '../../config/schema.ts';
import { budgetFromConfig, clientFromConfig } from '../../daemon/service-wiring.ts';
import type { TaskModule } from '../../handlers/define-task.ts';
import { HandlersDirectoryError } from '../../handlers/load-errors.ts';
import { loadHandlers } from '../../handlers/loader.ts';
import { errorCode } from '../../journal/durable-file.ts';
import { JournalUnavailableError } from '../../journal/errors.ts';
import { StateFolderLockedError, StateLock } from '../../journal/state-lock.ts';
import { wantsHelp, type Command, usageError, parseCommandArgs } from '../command.ts';
import { redactUrl } from '../../secrets/redact.ts';
import { cliCommand } from '../invocation.ts';
import { describeEntry, planTaskSync, type SyncEntry, type SyncPlan } from '../shared/task-sync-plan.ts';
import { EXIT_CONFIG, EXIT_FAILURE, EXIT_OK } from '../../errors/exit-codes.ts';

/** Tries per request when the service answers 429; a longer Retry-After than the cap fails the request. */
const RATE_LIMITED_TRIES = 3;
const MAX_RATE_LIMIT_WAIT_MS = 5 * 60_000;

export const tasksCommand: Command = {
  name: 'tasks',
  summary: "sync the service's custom tasks with the handlers' declarations",
  help: `
Usage: df-worker tasks sync [--dry-run] [--dir DIR]

Lists the service's custom tasks and compares each with the handler of the same key (description, retryCount,
inputKeys, outputKeys):
  + create KEY            no task on the service has the handler's key
  ~ update KEY: CHANGES   the task differs, e.g. "retryCount 0 -> 2, outputKeys +columns -old ~renamed"
  = KEY unchanged
      kept as on the service: FIELD=VALUE, ...   the task's other fields (timeoutSeconds...): sent back
                                                 unchanged, never compared
    (not managed here) KEY   a task with no handler here: never changed or deleted
Then creates and updates the tasks (unless --dry-run). Needs DF_API_URL and DF_API_KEY (or DF_API_KEY_FILE).
Requests count against the same budget as the daemon (DF_BUDGET_*, state in DF_STATE_DIR) and are paced by it.
So it takes the state folder's lock for its run, as the daemon does: while a daemon uses the same DF_STATE_DIR
(even --dry-run) it refuses and sends nothing; stop the daemon first, then start it again after the sync.
Exits 1 when a handler fails to load or the state folder is locked or unusable (nothing is sent), or when a
request failed (after trying the others).

Options:
  --dry-run   show the changes without making them (one request: the task list)
  --dir DIR   handlers folder (default: DF_HANDLERS_DIR, else ./handlers)
  -h, --help  this help
`,
  async run(argv) {
    if (wantsHelp(argv, this)) return EXIT_OK;
    const parsed = parseCommandArgs('tasks', {
      args: argv,
      options: { 'dry-run': { type: 'boolean', default: false }, dir: { type: 'string' } },
      allowPositionals: true,
    });
    if (typeof parsed === 'number') return parsed;
    const [subcommand, ...extra] = parsed.positionals;
    if (subcommand !== 'sync') {
      return usageError(
        'tasks',
        subcommand === undefined ? 'give a subcommand: sync' : `unknown subcommand "${subcommand}"`,
      );
    }
    if (extra.length > 0) return usageError('tasks', `unexpected arguments: ${extra.join(' ')}`);

    let config: WorkerConfig;
    try {
      config = loadConfig({ require: 'service' });
    } catch (error) {
      if (!(error instanceof ConfigError)) throw error;
      process.stderr.write(`df-worker tasks: ${describeError(error)}\n`);
      return EXIT_CONFIG;
    }
    const dir = path.resolve(parsed.values.dir ?? config.handlers.dir);
    const handlers = await loadAllHandlers(dir);
    if (handlers === undefined) return EXIT_FAILURE;
    return await sync(config, dir, handlers, parsed.values['dry-run']);
  },
};

/** Every handler of `dir`, or undefined (reasons printed) when any fails: a partial set would sync wrongly. */
async function loadAllHandlers(dir: string): Promise<ReadonlyMap<string, TaskModule> | undefined> {
  try {
    const { handlers, errors } = await loadHandlers(dir);
    if (errors.length === 0) return handlers;
    for (const error of errors) process.stderr.write(`df-worker tasks: ${describeError(error)}\n`);
    process.stderr.write(
      `df-worker tasks: fix the handlers above first (see \`${cliCommand('check')}\`); nothing was sent\n`,
    );
    return undefined;
  } catch (error) {
    if (!(error instanceof HandlersDirectoryError)) throw error;
    process.stderr.write(`df-worker tasks: ${describeError(error)}\n`);
    return undefined;
  }
}

/**
 * Runs the sync holding the state lock, released at the end whatever happens; only after the budget is saved,
 * so a daemon taking the folder next reads this run's requests in budget.json.
 */
async function sync(
  config: WorkerConfig,
  dir: string,
  handlers: ReadonlyMap<string, TaskModule>,
  dryRun: boolean,
): Promise<number> {
  const lock = await lockStateFolder(config.state.dir);
  if (lock === undefined) return EXIT_FAILURE;
  try {
    return await syncWithBudget(config, dir, handlers, dryRun);
  } finally {
    await lock.release();
  }
}

/**
 * The state folder's lock, or undefined (reason printed). Without it a running daemon and this command would
 * each count only their own requests in the same service windows and overwrite each other's month in budget.json.
 */
async function lockStateFolder(stateDir: string): Promise<StateLock | undefined> {
  try {
    return await StateLock.acquire(stateDir);
  } catch (error) {
    if (error instanceof StateFolderLockedError) {
      process.stderr.write(
        `df-worker tasks: ${describeError(error)}\n` +
          "df-worker tasks: the sync shares that worker's request budget, so it cannot run beside it; nothing " +
          'was sent. Stop that worker and run the sync again, or restart the daemon with DF_TASK_SYNC=true to ' +
          'have it create the missing tasks itself (it does not update changed ones)\n',
      );
      return undefined;
    }
    if (error instanceof JournalUnavailableError) {
      process.stderr.write(`df-worker tasks: ${stateFolderUnusable(stateDir, error.cause)}\n`);
      return undefined;
    }
    throw error;
  }
}

function stateFolderUnusable(stateDir: string, error: unknown): string {
  const reason = errorCode(error) ?? (error as Error).message;
  return (
    `cannot use the state folder ${stateDir} for the budget (${reason}); ` +
    'make it writable or set DF_STATE_DIR to a writable folder'
  );
}

async function syncWithBudget(
  config: WorkerConfig,
  dir: string,
  handlers: ReadonlyMap<string, TaskModule>,
  dryRun: boolean,
): Promise<number> {
  const stop = new AbortController();
  const onInterrupt = () => stop.abort(new Error('interrupted (Ctrl-C)'));
  process.once('SIGINT', onInterrupt);
  const budget = budgetFromConfig(config, systemClock);
  const client = clientFromConfig(config, budget);
  const send: Send = (request) => retryRateLimited(budget, request);
  try {
    try {
      await budget.load();
    } catch (error) {
      process.stderr.write(`df-worker tasks: ${stateFolderUnusable(config.state.dir, error)}\n`);
      return EXIT_FAILURE;
    }
    if (budget.snapshot().month.remaining < 1) {
      process.stderr.write(`df-worker tasks: ${monthExhausted(budget)}\n`);
      return EXIT_FAILURE;
    }
    let tasks: Task[];
    try {
      tasks = await send(() => client.listTasks({ signal: stop.signal }));
    } catch (error) {
      if (!isRequestFailure(error, stop.signal)) throw error;
      const text = `could not list the service's tasks: ${(error as Error).message}`;
      process.stderr.write(`df-worker tasks: ${describeError(error, text)}\n`);
      return EXIT_FAILURE;
    }
    const plan = planTaskSync(tasks, handlers);
    printPlan(plan, config.api.url, dir);
    const changes = plan.entries.filter((entry) => entry.action !== 'unchanged');
    if (dryRun) {
      process.stdout.write(`dry run: ${countActions(changes, 'planned')}; nothing was changed\n`);
      return EXIT_OK;
    }
    if (changes.length === 0) {
      process.stdout.write('nothing to change\n');
      return EXIT_OK;
    }
    if (budget.snapshot().month.remaining < changes.length) {
      process.stderr.write(`df-worker tasks: ${monthExhausted(budget)}; nothing was changed\n`);
      return EXIT_FAILURE;
    }
    return await applyChanges(client, send, changes, stop.signal);
  } finally {
    process.off('SIGINT', onInterrupt);
    await client.close();
    await budget.flush().catch((error: unknown) => {
      const text = `could not save the budget usage: ${(error as Error).message}`;
      process.stderr.write(`df-worker tasks: ${describeError(error, text)}\n`);
    });
  }
}

async function applyChanges(
  client: ServiceClient,
  send: Send,
  changes: Exclude<SyncEntry, { action: 'unchanged' }>[],
  signal: AbortSignal,
): Promise<number> {
  let made = 0;
  let failed = 0;
  for (const [index, entry] of changes.entries()) {
    const step = `[${index + 1}/${changes.length}]`;
    try {
      if (entry.action === 'create') {
        const created = await send(() => client.createTask(entry.definition, signal));
        process.stdout.write(`${step} created ${entry.key} (id ${created.id})\n`);
        made++;
      } else {
        await send(() => client.updateTask(entry.taskId, entry.definition, signal));
        process.stdout.write(`${step} updated ${entry.key}\n`);
        made++;
      }
    } catch (error) {
      if (!isRequestFailure(error, signal)) throw error;
      failed++;
      process.stdout.write(`${step} failed to ${entry.action} ${entry.key}: ${(error as Error).message}\n`);
      if (signal.aborted) break;
    }
  }
  if (made === changes.length) {
    process.stdout.write(`done: ${countActions(changes, 'done')}\n`);
    return EXIT_OK;
  }
  const notTried = changes.length - made - failed;
  process.stdout.write(
    `${made} of ${changes.length} changes made, ${failed} failed` +
      `${notTried === 0 ? '' : `, ${notTried} not tried (interrupted)`}; run it again to retry\n`,
  );
  return EXIT_FAILURE;
}

/** Sends one request through the budget, retrying it after a 429 RATE_LIMIT answer. */
type Send = <T>(request: () => Promise<T>) => Promise<T>;

/**
 * Runs `request`; after a 429 tries again, at most RATE_LIMITED_TRIES times. The budget heard the 429 through
 * the client's gate and paused every request for the Retry-After (or DF_RATE_LIMIT_PAUSE_MS), as in the daemon,
 * so the retry and the requests after it wait for the pause.
 */
async function retryRateLimited<T>(budget: Budget, request: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await request();
    } catch (error) {
      const waitMs = Math.max(0, budget.pausedUntil - systemClock.monotonic());
      const retry =
        error instanceof ServiceError &&
        error.status === 429 &&
        attempt < RATE_LIMITED_TRIES &&
        waitMs <= MAX_RATE_LIMIT_WAIT_MS;
      if (!retry) throw error;
      process.stderr.write(
        `the service answered 429 RATE_LIMIT; retrying in ${Math.ceil(waitMs / 1000)} s\n`,
      );
    }
  }
}

function printPlan(plan: SyncPlan, url: string, dir: string): void {
  const lines = [
    `tasks on ${describeUrl(url)} compared with the handlers in ${dir}:`,
    ...plan.entries.map(describeEntry),
    ...plan.unmanaged.map((key) => `  (not managed here) ${key}`),
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
}

/** `1 to create, 2 to update` before the changes, `1 created, 2 updated` after them. */
function countActions(changes: SyncEntry[], tense: 'planned' | 'done'): string {
  const creates = changes.filter((c) => c.action === 'create').length;
  const updates = changes.filter((c) => c.action === 'update').length;
  return tense === 'planned'
    ? `${creates} to create, ${updates} to update`
    : `${creates} created, ${updates} updated`;
}

/** The service's address as printed: any credentials, query or fragment masked (secrets/redact.ts). */
function describeUrl(url: string): string {
  return redactUrl(url).replace(/\/$/, '');
}

function monthExhausted(budget: Budget): string {
  const { month } = budget.snapshot();
  return (
    `the monthly request budget is spent (${month.used} of ${month.limit} this month, until ` +
    `${new Date(month.endsAt).toISOString()}); raise DF_BUDGET_PER_MONTH if the key allows more, or wait`
  );
}

/** A failure of one request (the service, the network, the budget or Ctrl-C), as opposed to a bug. */
function isRequestFailure(error: unknown, signal: AbortSignal): boolean {
  return error instanceof ServiceClientError || error instanceof BudgetExhaustedError || signal.aborted;
}
