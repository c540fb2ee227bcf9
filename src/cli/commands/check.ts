// `df-worker check`: what `start` would refuse, found before deploying: every configuration problem and every
// handler module that fails to load, listed at once. Never prints a secret.
import path from 'node:path';
import { redactedConfig } from '../../config/describe.ts';
import { ConfigError, formatProblem, UnknownSettingsError, type ConfigProblem } from '../../config/errors.ts';
import { loadConfig } from '../../config/load.ts';
import type { WorkerConfig } from '../../config/schema.ts';
import { findUnknownSettings, ignoredVariables } from '../../config/unknown-settings.ts';
import { describeError } from '../../errors/catalogue.ts';
import { HandlersDirectoryError } from '../../handlers/load-errors.ts';
import { loadHandlers } from '../../handlers/loader.ts';
import { EXIT_FAILURE, EXIT_OK } from '../../errors/exit-codes.ts';
import { wantsHelp, type Command, parseCommandArgs, usageError } from '../command.ts';
import { checkOnline, type HandlerToCheck } from '../online-check.ts';

export type ConfigCheck =
  { config: WorkerConfig; problems: [] } | { config: undefined; problems: ConfigProblem[] };

/**
 * Loads the configuration as `start` would when a service URL is set (URL and key required), else as `demo`
 * would. A URL given in a DF_CONFIG file only shows after a first load, hence the second one.
 */
export function checkConfig(env: NodeJS.ProcessEnv): ConfigCheck {
  const attempt = (require: 'service' | 'none'): ConfigCheck => {
    try {
      return { config: loadConfig({ env, require }), problems: [] };
    } catch (error) {
      if (!(error instanceof ConfigError)) throw error;
      return { config: undefined, problems: error.problems };
    }
  };
  const urlInEnv = env.DF_API_URL !== undefined && env.DF_API_URL !== '';
  const first = attempt(urlInEnv ? 'service' : 'none');
  if (!urlInEnv && first.config !== undefined && first.config.api.url !== '') return attempt('service');
  return first;
}

/**
 * Lines naming the DF_* variables that are no setting (each with the setting it was probably meant to be), as
 * errors, or as warnings when `allowed`; `problems` counts the errors.
 */
export function checkUnknownSettings(
  env: NodeJS.ProcessEnv,
  config: WorkerConfig | undefined,
  allowed: boolean,
): { lines: string[]; problems: number } {
  const unknown = findUnknownSettings(env, ignoredVariables(env, config));
  if (unknown.length === 0) return { lines: [], problems: 0 };
  const count = unknown.length === 1 ? '1 unknown DF_* variable' : `${unknown.length} unknown DF_* variables`;
  const remedy = allowed
    ? 'allowed by --allow-unknown-settings'
    : 'correct them, list those another tool reads in DF_IGNORE_UNKNOWN, or pass --allow-unknown-settings';
  return {
    lines: [
      `settings: ${count} (${remedy})`,
      ...unknown.map((one) => {
        const line = describeError(new UnknownSettingsError([one]));
        return `  ${allowed ? line.replace(/^error /, 'warning ') : line}`;
      }),
    ],
    problems: allowed ? 0 : unknown.length,
  };
}

/** Lines describing the handlers of `dir` and the problems found there (each naming its file). */
export async function checkHandlers(
  dir: string,
): Promise<{ lines: string[]; problems: number; loaded: HandlerToCheck[] }> {
  try {
    const { handlers, errors } = await loadHandlers(dir);
    const keys = [...handlers.keys()].sort();
    const failed = errors.length === 0 ? '' : `; ${errors.length} failed`;
    return {
      loaded: keys.map((key) => {
        const handler = handlers.get(key)!;
        // `concurrency` is read as whatever the definition holds: older definitions have none.
        const { concurrency } = handler as { concurrency?: unknown };
        return { key, file: handler.file, timeoutMs: handler.timeoutMs, concurrency };
      }),
      lines: [
        `handlers: ${keys.length} loaded from ${dir}${keys.length === 0 ? '' : ` (${keys.join(', ')})`}${failed}`,
        ...errors.map((error) => `  ${error.message}`),
      ],
      problems: errors.length,
    };
  } catch (error) {
    if (!(error instanceof HandlersDirectoryError)) throw error;
    return { lines: ['handlers: none loaded', `  ${error.message}`], problems: 1, loaded: [] };
  }
}

export const checkCommand: Command = {
  name: 'check',
  summary: 'validate the configuration and load every handler, listing all problems',
  help: `
Usage: df-worker check [--dir DIR] [--config FILE] [--verbose] [--online] [--allow-unknown-settings]

Validates the configuration (DF_* variables and the DF_CONFIG file; when DF_API_URL is set, also what \`start\`
requires: a URL and exactly one of DF_API_KEY and DF_API_KEY_FILE) and loads every handler module, then lists
every problem found, each naming the setting or the file to fix. Exits 0 when all is well, 1 otherwise.
Secrets (the API key, the wake token) are never printed. A DF_* variable that is no setting (DF_API_KYE) is a
problem, named with the setting it was probably meant to be, unless DF_IGNORE_UNKNOWN lists it.

With --online (DF_API_URL and a key needed), it also lists the service's tasks (one request per 1,000 tasks),
counted in the state folder's budget like the daemon's own, and reports whether the URL reaches the service,
whether the key is valid, whether every loaded handler's task is there (a handler without one is a problem,
named with its file, the nearest task key and the fix: tasks sync), and the month's budget used and left. A
worker running on the same state folder holds its budget: then nothing is sent, and the budget shown is the
one that worker last saved.

Options:
  --dir DIR       handlers folder (default: DF_HANDLERS_DIR, else ./handlers)
  --config FILE   a JSON config file (same as DF_CONFIG=FILE)
  --verbose       also print the whole configuration, secrets redacted
  --online        also try the service: URL, key, each handler's task and budget
  --allow-unknown-settings
                  only warn about DF_* variables that are no setting
  -h, --help      this help
`,
  async run(argv) {
    if (wantsHelp(argv, this)) return EXIT_OK;
    const parsed = parseCommandArgs('check', {
      args: argv,
      options: {
        dir: { type: 'string' },
        config: { type: 'string' },
        verbose: { type: 'boolean', default: false },
        online: { type: 'boolean', default: false },
        'allow-unknown-settings': { type: 'boolean', default: false },
      },
    });
    if (typeof parsed === 'number') return parsed;
    const { values } = parsed;
    const env = values.config === undefined ? process.env : { ...process.env, DF_CONFIG: values.config };
    const lines: string[] = [];

    const { config, problems } = checkConfig(env);
    if (values.online && config !== undefined && config.api.url === '') {
      return usageError('check', '--online needs DF_API_URL and DF_API_KEY (or DF_API_KEY_FILE)');
    }
    if (config === undefined) {
      lines.push(`config: ${problems.length} ${problems.length === 1 ? 'problem' : 'problems'}`);
      lines.push(...problems.map((problem) => `  ${formatProblem(problem)}`));
    } else {
      const access =
        config.api.url === ''
          ? 'no DF_API_URL: `start` and `tasks sync` need it and a key; `demo`, `run` and `new` do not'
          : 'service URL and API key set';
      lines.push(`config: ok (${access})`);
      if (values.verbose) lines.push(JSON.stringify(redactedConfig(config), null, 2));
    }
    const unknown = checkUnknownSettings(env, config, values['allow-unknown-settings']);
    lines.push(...unknown.lines);

    // With an unusable configuration, the folder is what DF_HANDLERS_DIR (or the default) says.
    const dir = path.resolve(values.dir ?? config?.handlers.dir ?? (env.DF_HANDLERS_DIR || './handlers'));
    const handlers = await checkHandlers(dir);
    lines.push(...handlers.lines);

    let onlineProblems = 0;
    if (values.online) {
      if (config === undefined) {
        lines.push('online: not tried (fix the configuration first)');
      } else {
        const online = await checkOnline(config, handlers.loaded);
        lines.push(...online.lines);
        onlineProblems = online.problems;
      }
    }

    const total = problems.length + unknown.problems + handlers.problems + onlineProblems;
    if (total > 0) {
      lines.push(`check failed: ${total} ${total === 1 ? 'problem' : 'problems'}; fix them and run it again`);
    }
    process.stdout.write(`${lines.join('\n')}\n`);
    return total === 0 ? EXIT_OK : EXIT_FAILURE;
  },
};
