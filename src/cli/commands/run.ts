// `df-worker run <task-key> --input JSON`: runs one handler once on a hand-given input, through the same runner
// (input and output checks, retries, timeout) the daemon uses, without a service.
import path from 'node:path';
import { pino, type DestinationStream } from 'pino';
import { ServiceClient } from '../../api/client.ts';
import type { JsonObject } from '../../api/types.ts';
import { ConfigError } from '../../config/errors.ts';
import { Emulator } from '../../emulator/index.ts';
import { MAX_TIMER_MS } from '../../config/formats.ts';
import { loadConfig } from '../../config/load.ts';
import { describeError } from '../../errors/catalogue.ts';
import { backoffFromConfig } from '../../daemon/service-wiring.ts';
import type { TaskModule } from '../../handlers/define-task.ts';
import { HandlersDirectoryError, type HandlerLoadError } from '../../handlers/load-errors.ts';
import { loadHandlers } from '../../handlers/loader.ts';
import type { ExecutionOutcome } from '../../runner/run-execution.ts';
import { runTaskLocally } from '../../runner/run-locally.ts';
import { createLogger } from '../../telemetry/logger.ts';
import { wantsHelp, type Command, usageError, parseCommandArgs } from '../command.ts';
import { cliCommand } from '../invocation.ts';
import { parseVariableOptions } from '../variable-option.ts';
import { EXIT_CONFIG, EXIT_FAILURE, EXIT_OK } from '../../errors/exit-codes.ts';
import { InputError, readInputArgument } from '../shared/json-input.ts';
import { warnUnknownSettings } from '../shared/unknown-settings.ts';

/** How long `run` waits for whatever a handler left running before it exits anyway, in milliseconds. */
const LINGER_MS = 1_000;

/** Load failures that concern the wanted task (its own file, or its key defined twice) vs. the others. */
export function splitLoadErrors(
  errors: HandlerLoadError[],
  key: string,
): { wanted: HandlerLoadError[]; others: HandlerLoadError[] } {
  const concernsKey = (error: HandlerLoadError) =>
    path.basename(error.file, path.extname(error.file)) === key ||
    // The loader reports a key defined in two files with this wording; neither copy was loaded.
    error.message.includes(`task key "${key}" is defined in`);
  return { wanted: errors.filter(concernsKey), others: errors.filter((e) => !concernsKey(e)) };
}

/** The one line printed on stderr after a run: status, attempts, duration and, when it failed, why. */
export function summariseOutcome(key: string, outcome: ExecutionOutcome): string {
  const attempts = `${outcome.attempts} ${outcome.attempts === 1 ? 'attempt' : 'attempts'}`;
  const head = `${key}: ${outcome.status}, ${attempts}, ${Math.round(outcome.durationMs)} ms`;
  if (outcome.failure === undefined) return head;
  return `${head} (${outcome.failure.kind}: ${outcome.failure.message})`;
}

/** The key of the emulator behind ctx.service in a run: it never leaves the process. */
const RUN_KEY = 'df-worker-run';

export const runCommand: Command = {
  name: 'run',
  summary: 'run one handler locally on a given input and print its output',
  help: `
Usage: df-worker run <task-key> --input '<json>' | --input @file.json [--dir DIR] [--timeout-ms N] [--retries N]
                     [--variable ID=VALUE]...

Loads the handlers folder, runs the handler of <task-key> once on the input with the daemon's runner (declared
input keys checked first, output keys after, retries with back-off from DF_RETRY_BASE_MS up to
DF_ERROR_BACKOFF_MAX_MS, per-attempt timeout), prints the output as JSON on stdout and a one-line summary on
stderr. No service is contacted: ctx.service calls are answered by an emulator of the service started for the
run (listed on stderr). An input member "context" (an object) is passed to the handler as ctx.job, as
the service's job context would be. Handler logs go to stderr (level DF_LOG_LEVEL, default warn here). Exits 0 when COMPLETED, 1 when FAILED.

Options:
  --input JSON|@FILE  the execution's input: a JSON object, or @ and the path of a file holding one (required)
  --dir DIR           handlers folder (default: DF_HANDLERS_DIR, else ./handlers)
  --timeout-ms N      per-attempt time limit in ms, overriding the handler's timeoutMs
                      (default: the handler's, else DF_HANDLER_TIMEOUT_MS)
  --retries N         retries after a failed attempt, overriding the handler's retryCount
  --variable ID=VALUE a variable the run's emulator holds, for ctx.service.variables.get(ID); repeatable
  -h, --help          this help
`,
  async run(argv) {
    if (wantsHelp(argv, this)) return EXIT_OK;
    const parsed = parseCommandArgs('run', {
      args: argv,
      options: {
        input: { type: 'string' },
        dir: { type: 'string' },
        'timeout-ms': { type: 'string' },
        retries: { type: 'string' },
        variable: { type: 'string', multiple: true },
      },
      allowPositionals: true,
    });
    if (typeof parsed === 'number') return parsed;
    const { values, positionals } = parsed;
    const [key, ...extra] = positionals;
    if (key === undefined) return usageError('run', 'give the task key of the handler to run');
    if (extra.length > 0) return usageError('run', `unexpected arguments: ${extra.join(' ')}`);
    if (values.input === undefined)
      return usageError('run', `give the input, e.g. --input '{"text": "hello"}'`);
    const timeoutMs = wholeNumber(values['timeout-ms'], '--timeout-ms', 1, MAX_TIMER_MS);
    const retries = wholeNumber(values.retries, '--retries', 0, 1_000);
    if (typeof timeoutMs === 'string') return usageError('run', timeoutMs);
    if (typeof retries === 'string') return usageError('run', retries);
    const variables = parseVariableOptions(values.variable);
    if (typeof variables === 'string') return usageError('run', variables);

    let input: JsonObject;
    try {
      input = await readInputArgument(values.input, process.cwd());
    } catch (error) {
      if (!(error instanceof InputError)) throw error;
      return usageError('run', describeError(error));
    }

    let config;
    try {
      // Quieter than the daemon by default: the summary line already says what happened.
      config = loadConfig({ env: { DF_LOG_LEVEL: 'warn', ...process.env }, require: 'none' });
    } catch (error) {
      if (!(error instanceof ConfigError)) throw error;
      process.stderr.write(`df-worker run: ${describeError(error)}\n`);
      warnUnknownSettings('run');
      return EXIT_CONFIG;
    }
    warnUnknownSettings('run', config);
    const handler = await findHandler(values.dir ?? config.handlers.dir, key);
    if (handler === undefined) return EXIT_FAILURE;

    const logger = createLogger({ level: config.log.level, destination: humanLogLines(process.stderr) });
    const task: TaskModule = timeoutMs === undefined ? handler : { ...handler, timeoutMs };
    const stop = new AbortController();
    const onInterrupt = () => stop.abort();
    process.once('SIGINT', onInterrupt);
    // ctx.service answers from an emulator of the service on loopback, started for this run: a handler that
    // uploads a file or reads a variable runs as it would in the daemon, and no real service is contacted.
    const emulator = new Emulator({ apiKeys: [RUN_KEY] });
    for (const variable of variables) emulator.createVariable(variable);
    const service = new ServiceClient({ baseUrl: await emulator.listen(0, '127.0.0.1'), apiKey: RUN_KEY });
    let outcome: ExecutionOutcome;
    try {
      outcome = await runTaskLocally(task, input, {
        logger,
        shutdownSignal: stop.signal,
        defaultTimeoutMs: config.handlers.timeoutMs,
        backoff: backoffFromConfig(config),
        service,
        ...(retries === undefined ? {} : { retryCount: retries }),
      });
    } finally {
      process.off('SIGINT', onInterrupt);
      await service.close();
      await emulator.close();
    }
    process.stdout.write(`${JSON.stringify(outcome.output, null, 2)}\n`);
    const calls = emulator.requests().map((r) => `${r.operation} ${r.status}`);
    if (calls.length > 0) {
      process.stderr.write(`ctx.service: ${calls.join(', ')} (answered by an emulator of the service)\n`);
    }
    process.stderr.write(`${summariseOutcome(key, outcome)}\n`);
    // A handler may leave work behind (a connection pool, a fetch that ignores ctx.signal after a timeout), which
    // would keep a one-shot command alive: exit anyway, with the code main sets, once the output is written.
    setTimeout(() => process.exit(), LINGER_MS).unref();
    return outcome.status === 'COMPLETED' ? EXIT_OK : EXIT_FAILURE;
  },
};

/** The handler of `key`, with other broken files shown as warnings; undefined (reason printed) when unusable. */
async function findHandler(dir: string, key: string): Promise<TaskModule | undefined> {
  let loaded;
  try {
    loaded = await loadHandlers(path.resolve(dir));
  } catch (error) {
    if (!(error instanceof HandlersDirectoryError)) throw error;
    process.stderr.write(`df-worker run: ${describeError(error)}\n`);
    return undefined;
  }
  const handler = loaded.handlers.get(key);
  const { wanted, others } = splitLoadErrors(loaded.errors, key);
  // Other broken files are warnings only: they do not change this run.
  for (const error of handler === undefined ? others : loaded.errors) {
    process.stderr.write(`warning: ${error.message}\n`);
  }
  if (handler !== undefined) return handler;
  if (wanted.length > 0) {
    for (const error of wanted) process.stderr.write(`df-worker run: ${describeError(error)}\n`);
    return undefined;
  }
  const known = [...loaded.handlers.keys()].sort();
  process.stderr.write(
    `df-worker run: no handler for task key "${key}" in ${path.resolve(dir)}; ` +
      (known.length === 0 ? 'no handler loaded there' : `known keys: ${known.join(', ')}`) +
      ` (create one with \`${cliCommand(`new ${key}`)}\`)\n`,
  );
  return undefined;
}

/**
 * A pino destination that prints each log line as `level: message {fields}` for a person at a terminal; the
 * fields every line of a run shares (time, execution id...) are left out.
 */
export function humanLogLines(out: { write(text: string): unknown }): DestinationStream {
  return {
    write(line: string) {
      let record: Record<string, unknown>;
      try {
        record = JSON.parse(line) as Record<string, unknown>;
      } catch {
        out.write(line);
        return;
      }
      const {
        level,
        msg,
        time: _time,
        name: _name,
        pid: _pid,
        hostname: _host,
        executionId: _id,
        err,
        ...fields
      } = record;
      const label = typeof level === 'number' ? (pino.levels.labels[level] ?? String(level)) : String(level);
      const error = (err as { message?: unknown } | undefined)?.message;
      if (typeof error === 'string') fields.err = error;
      const extra = Object.keys(fields).length === 0 ? '' : ` ${JSON.stringify(fields)}`;
      out.write(`${label}: ${typeof msg === 'string' ? msg : ''}${extra}\n`);
    },
  };
}

/** The option's value as an integer in [min, max], undefined when absent, or a message when invalid. */
function wholeNumber(
  raw: string | undefined,
  name: string,
  min: number,
  max: number,
): number | string | undefined {
  if (raw === undefined) return undefined;
  const value = Number(raw);
  if (raw.trim() === '' || !Number.isSafeInteger(value) || value < min || value > max) {
    return `${name} must be a whole number from ${min} to ${max}, got "${raw}"`;
  }
  return value;
}
