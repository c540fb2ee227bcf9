// `df-worker dev`: the local loop in one command. The embedded emulator on loopback, its tasks synced from the
// handlers' declarations, the daemon on it, every enqueue waking the daemon, and the handlers reloaded when
// their files change. `df-worker dev --enqueue TASK [INPUT]` feeds it from a second terminal.
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { SERVICE_REQUEST_LIMITS_TEXT } from '../../api/service-limits.ts';
import type { JsonObject } from '../../api/types.ts';
import { ConfigError } from '../../config/errors.ts';
import { loadConfig } from '../../config/load.ts';
import { describeError } from '../../errors/catalogue.ts';
import type { WorkerConfig } from '../../config/schema.ts';
import { WorkerEvents } from '../../events/worker-events.ts';
import { Emulator, type EmulatedExecution, type NewVariable } from '../../emulator/index.ts';
import { createLogger } from '../../telemetry/logger.ts';
import { isPlainObject } from '../../schema/plain-object.ts';
import { parseCommandArgs, usageError, wantsHelp, type Command } from '../command.ts';
import { enqueueIntoSession } from '../dev/enqueue.ts';
import { HandlerSet } from '../dev/handler-set.ts';
import { HandlerWatch } from '../dev/handler-watch.ts';
import { printBanner, printReports } from '../dev/session-output.ts';
import { parseVariableOptions } from '../variable-option.ts';
import {
  findLiveSession,
  NoDevSessionError,
  readLiveSession,
  removeSessionFile,
  writeSessionFile,
} from '../dev/session-file.ts';
import { describeStartupFailure, runDaemon, type RunningDaemon } from '../run-daemon.ts';
import { describeJsonError } from '../shared/json-input.ts';
import { warnUnknownSettings } from '../shared/unknown-settings.ts';
import { EXIT_CONFIG, EXIT_FAILURE, EXIT_OK } from '../../errors/exit-codes.ts';

/** How often the session looks for new reports to print, in ms. */
const REPORT_WATCH_MS = 25;
const DEFAULT_WAIT_MS = 60_000;

export const devCommand: Command = {
  name: 'dev',
  summary: 'local loop: emulator + daemon + handler reload; --enqueue feeds it from another terminal',
  help: `
Usage: df-worker dev [--dir DIR] [--port N] [--state-dir DIR] [--variable ID=VALUE]...
       df-worker dev --enqueue TASK [INPUT_JSON] [--wait-ms MS] [--state-dir DIR]

Starts the embedded emulator on 127.0.0.1 (its URL, API key and admin token are printed, and the URL of its
web console, /console, with the admin token in the fragment), creates or updates
its tasks from the handlers' declarations, and runs the daemon on it. Every execution enqueued (by --enqueue,
the admin route or curl) wakes the daemon, so it is picked up at once rather than at the idle pace; each
outcome is printed as the emulator records it. Handler files are watched: after an edit the handlers are
loaded again, tasks synced, and new attempts run the new code (attempts running finish on theirs). A handler
that no longer loads is reported and its task pauses (not polled) until its file loads again; executions
enqueued meanwhile wait. Ctrl-C stops it (the emulator's state is in memory and goes with it).

The session is written to STATE_DIR/dev-session.json (mode 600) for --enqueue and scripts to find it.

Options:
  --dir DIR         handlers folder (default DF_HANDLERS_DIR, else ./handlers)
  --port N          emulator port (default 0: any free port)
  --state-dir DIR   where the session file goes (default DF_STATE_DIR, else ./.state); the daemon's own
                    journal and budget go to a temp folder removed at exit
  --variable ID=VALUE
                    a variable the emulator holds from the start, for ctx.service.variables.get(ID);
                    repeatable
  --enqueue TASK    enqueue one execution of TASK into the running session, input INPUT_JSON (default {}),
                    wait for its report and print it (exit 0 COMPLETED, 1 FAILED or not reported in time)
  --wait-ms MS      with --enqueue: how long to wait for the report (default 60000; 0: do not wait)
  -h, --help        this help

Settings: DF_BUDGET_PER_SECOND/MINUTE/MONTH set both the emulator's limits and the daemon's budget (default
the service's: ${SERVICE_REQUEST_LIMITS_TEXT}); DF_LOG_LEVEL (default warn) the daemon's JSON logs on stderr.
`,
  async run(argv) {
    if (wantsHelp(argv, this)) return EXIT_OK;
    const parsed = parseCommandArgs('dev', {
      args: argv,
      allowPositionals: true,
      options: {
        dir: { type: 'string' },
        port: { type: 'string', default: '0' },
        'state-dir': { type: 'string' },
        enqueue: { type: 'string' },
        'wait-ms': { type: 'string', default: String(DEFAULT_WAIT_MS) },
        variable: { type: 'string', multiple: true },
      },
    });
    if (typeof parsed === 'number') return parsed;
    const { values, positionals } = parsed;
    const stateDir = values['state-dir'] ?? process.env.DF_STATE_DIR ?? './.state';
    if (values.enqueue !== undefined) {
      if (values.variable !== undefined) {
        return usageError('dev', '--variable goes with the session, not with --enqueue');
      }
      if (positionals.length > 1) {
        return usageError('dev', 'give the input as one JSON argument (quote it), e.g. \'{"sku":"A"}\'');
      }
      if (!/^\d+$/.test(values['wait-ms'])) {
        return usageError('dev', `--wait-ms must be a whole number >= 0, got "${values['wait-ms']}"`);
      }
      return enqueue(stateDir, values.enqueue, positionals[0] ?? '{}', Number(values['wait-ms']));
    }
    if (positionals.length > 0) {
      return usageError('dev', `unexpected argument "${positionals[0]}" (an input goes with --enqueue TASK)`);
    }
    if (!/^\d+$/.test(values.port) || Number(values.port) > 65_535) {
      return usageError('dev', `--port must be a whole number from 0 to 65535, got "${values.port}"`);
    }
    const variables = parseVariableOptions(values.variable);
    if (typeof variables === 'string') return usageError('dev', variables);
    return session({
      stateDir,
      port: Number(values.port),
      variables,
      ...(values.dir ? { dir: values.dir } : {}),
    });
  },
};

async function enqueue(
  stateDir: string,
  taskKey: string,
  inputText: string,
  waitMs: number,
): Promise<number> {
  let input: JsonObject;
  try {
    const value = JSON.parse(inputText) as unknown;
    if (!isPlainObject(value)) {
      return usageError('dev', `the input must be a JSON object such as '{"sku":"A"}', got ${inputText}`);
    }
    input = value;
  } catch {
    return usageError('dev', `the input is not valid JSON: ${describeJsonError(inputText)}`);
  }
  const say = (line: string) => process.stdout.write(`${line}\n`);
  let devSession;
  try {
    devSession = await readLiveSession(stateDir);
  } catch (error) {
    if (!(error instanceof NoDevSessionError)) throw error;
    process.stderr.write(`df-worker dev: ${describeError(error)}\n`);
    return EXIT_FAILURE;
  }
  const result = await enqueueIntoSession({ session: devSession, taskKey, input, waitMs, say });
  switch (result.kind) {
    case 'refused':
      process.stderr.write(`df-worker dev: ${result.message}\n`);
      return EXIT_FAILURE;
    case 'queued':
      return EXIT_OK;
    case 'waiting':
      process.stderr.write(
        `df-worker dev: ${result.execution.id} was ${result.execution.claimedAt ? 'picked up but not reported' : 'not picked up'} ` +
          `within ${waitMs} ms; see the dev session's terminal (a task whose handler does not load is paused)\n`,
      );
      return EXIT_FAILURE;
    case 'reported': {
      const report = result.execution.reports[0]!;
      say(
        `${report.status === 'COMPLETED' ? '✔' : '✖'} ${result.execution.id} ${report.status}: picked up ` +
          `${result.pickupMs} ms after the enqueue, reported after ${result.reportedMs} ms`,
      );
      say(JSON.stringify(report.output, null, 2));
      return report.status === 'COMPLETED' ? EXIT_OK : EXIT_FAILURE;
    }
  }
}

interface SessionOptions {
  stateDir: string;
  port: number;
  /** Created in the emulator before the daemon starts (`--variable`). */
  variables: NewVariable[];
  dir?: string;
}

async function session(options: SessionOptions): Promise<number> {
  const say = (line: string) => process.stdout.write(`${line}\n`);
  const running = await findLiveSession(options.stateDir);
  if (running) {
    process.stderr.write(
      `df-worker dev: a dev session already runs for this state folder (pid ${running.pid}, emulator ` +
        `${running.url}); stop it first, or give this one another --state-dir\n`,
    );
    return EXIT_FAILURE;
  }
  // Keys of this session alone: a page that knows a fixed key could drive the emulator through the service routes.
  const apiKey = randomBytes(16).toString('hex');
  const wakeToken = randomBytes(16).toString('hex');
  let config: WorkerConfig;
  try {
    config = devConfig(options, { apiKey, wakeToken });
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    process.stderr.write(`df-worker dev: ${describeError(error)}\n`);
    warnUnknownSettings('dev');
    return EXIT_CONFIG;
  }
  warnUnknownSettings('dev', config);
  const workDir = await mkdtemp(path.join(tmpdir(), 'df-worker-dev-'));
  const adminToken = randomBytes(16).toString('hex');
  let daemon: RunningDaemon | undefined;
  const tracked = new Map<string, EmulatedExecution>();
  const events = new WorkerEvents();
  const emulator = new Emulator({
    apiKeys: [apiKey],
    adminToken,
    // The service's limits unless DF_BUDGET_* says otherwise: the daemon's budget and the emulator agree.
    limits: {
      perSecond: config.budget.perSecond,
      perMinute: config.budget.perMinute,
      perMonth: config.budget.perMonth,
    },
    onEnqueue: (execution) => {
      tracked.set(execution.id, execution);
      daemon?.worker.wake(execution.taskKey);
    },
  });
  for (const variable of options.variables) emulator.createVariable(variable);
  // The console records what the worker does from its first claim on: mounted before the worker runs.
  const { mountConsole } = await import('../../console/index.ts');
  const local = mountConsole(emulator, { mode: 'dev session', events });
  let watch: HandlerWatch | undefined;
  let reportWatch: NodeJS.Timeout | undefined;
  try {
    const url = await emulator.listen(options.port, '127.0.0.1');
    config = {
      ...config,
      api: { ...config.api, url },
      state: { ...config.state, dir: path.join(workDir, 'state') },
    };
    const logger = createLogger({
      level: config.log.level,
      pretty: config.log.pretty,
      destination: process.stderr,
      // Handlers' lines at info and above reach the console's attempts whatever DF_LOG_LEVEL prints.
      tee: { level: captureLevel(config.log.level), stream: local.logStream },
    });
    const handlersDir = path.resolve(config.handlers.dir);
    const loader = new HandlerSet(config, emulator, say);
    let first;
    try {
      first = await loader.load();
    } catch (error) {
      process.stderr.write(`df-worker dev: ${describeError(error, describeStartupFailure(error))}\n`);
      return EXIT_FAILURE;
    }
    try {
      daemon = await runDaemon(config, logger, { handlers: first, events, loopbackHostsOnly: true });
    } catch (error) {
      const message = describeStartupFailure(error);
      process.stderr.write(`df-worker dev: ${describeError(error, `could not start: ${message}`)}\n`);
      return EXIT_FAILURE;
    }
    local.attachWorker(daemon.worker);
    const file = await writeSessionFile(options.stateDir, {
      pid: process.pid,
      url,
      apiKey,
      adminToken,
      workerUrl: daemon.url ?? '',
      handlersDir,
      startedAt: new Date().toISOString(),
    });
    printBanner(say, {
      url,
      apiKey,
      wakeToken,
      adminToken,
      consoleUrl: local.url(url, adminToken),
      file,
      handlersDir,
      workerUrl: daemon.url ?? '',
      handlers: [...first.values()],
      budget: config.budget,
      variables: options.variables,
    });

    const live = daemon;
    watch = new HandlerWatch({
      dir: handlersDir,
      onChange: async (files) => {
        // Edits while the session stops wait for the next one.
        if (live.worker.state !== 'running') return;
        try {
          const handlers = await loader.load(files);
          await live.worker.replaceHandlers(handlers);
        } catch (error) {
          say(`✖ reload failed: ${describeStartupFailure(error)}`);
        }
      },
      onError: (error) => say(`✖ the handlers folder is no longer watched: ${error.message}`),
    });
    reportWatch = setInterval(() => printReports(emulator, tracked, say), REPORT_WATCH_MS);
    const code = await daemon.exited;
    printReports(emulator, tracked, say);
    return code;
  } finally {
    // Already stopped after a signal; stopped here when the session failed after the daemon started.
    await daemon?.stop();
    watch?.close();
    await watch?.settled();
    clearInterval(reportWatch);
    await removeSessionFile(options.stateDir).catch(() => undefined);
    await emulator.close();
    await rm(workDir, { recursive: true, force: true });
  }
}

/** The daemon's settings in a session: DF_* as usual, but the emulator for service and a temp state folder. */
function devConfig(options: SessionOptions, keys: { apiKey: string; wakeToken: string }): WorkerConfig {
  const overrides: Record<string, unknown> = {
    'api.url': 'http://127.0.0.1', // the emulator's, once it listens
    'api.key': keys.apiKey,
    'api.keyFile': '',
    // The session syncs the tasks itself, updates included (see HandlerSet).
    'tasks.sync': false,
    'http.port': 0,
    'http.host': '127.0.0.1',
    'http.wake': 'token',
    'http.wakeToken': keys.wakeToken,
    ...(options.dir === undefined ? {} : { 'handlers.dir': options.dir }),
  };
  const env = { DF_LOG_LEVEL: 'warn', ...process.env };
  const config = loadConfig({ env, overrides });
  // A module imported on the daemon's own loop stays for the life of the process: reloading needs workers.
  if (config.handlers.isolation !== 'none') return config;
  return loadConfig({ env, overrides: { ...overrides, 'handlers.isolation': 'thread' } });
}

/** The level of the lines the console keeps: info, or lower when DF_LOG_LEVEL asks for more. */
function captureLevel(level: string): string {
  return level === 'debug' || level === 'trace' ? level : 'info';
}
