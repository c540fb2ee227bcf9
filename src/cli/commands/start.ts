// `df-worker start`: the daemon. Config from DF_* variables and DF_CONFIG; exits 0 after a drained stop.
import { ConfigError } from '../../config/errors.ts';
import { loadConfig } from '../../config/load.ts';
import { saveCompileCache } from '../../sandbox/index.ts';
import { createLogger } from '../../telemetry/logger.ts';
import { parseCommandArgs, wantsHelp, type Command } from '../command.ts';
import { describeStartupFailure, runStartDaemon } from '../run-daemon.ts';

/** How long after start the compile cache is written, in ms. */
const COMPILE_CACHE_SAVE_DELAY_MS = 2_000;

/** sysexits EX_CONFIG: the configuration is wrong; restarting will not help. */
export const EXIT_CONFIG = 78;

export const startCommand: Command = {
  name: 'start',
  summary: 'run the daemon: poll the service, run handlers, report outcomes',
  help: `
Usage: df-worker start [--config FILE]

Runs the worker until SIGTERM or SIGINT, then drains: stops polling, lets running handlers finish within
DF_SHUTDOWN_GRACE_MS, reports every outcome, exits 0. Needs DF_API_URL and DF_API_KEY (or DF_API_KEY_FILE).

Options:
  --config FILE   a JSON config file (same as DF_CONFIG=FILE)
  -h, --help      this help
`,
  async run(argv) {
    if (wantsHelp(argv, this)) return 0;
    const parsed = parseCommandArgs('start', { args: argv, options: { config: { type: 'string' } } });
    if (typeof parsed === 'number') return parsed;
    const { values } = parsed;
    const env = values.config ? { ...process.env, DF_CONFIG: values.config } : process.env;
    let config;
    try {
      config = loadConfig({ env, require: 'service' });
    } catch (error) {
      if (error instanceof ConfigError) {
        process.stderr.write(`df-worker: ${error.message}\n`);
        return EXIT_CONFIG;
      }
      throw error;
    }
    const logger = createLogger({ level: config.log.level, pretty: config.log.pretty });
    try {
      const daemon = await runStartDaemon(config, logger);
      // Every module of the daemon is loaded by now; a daemon that is killed rather than stopped keeps them. Not at
      // once: writing the cache of a first start takes some 100 ms, which would hold up the first polls.
      setTimeout(saveCompileCache, COMPILE_CACHE_SAVE_DELAY_MS).unref();
      // The daemon has drained; whatever still holds the event loop is handler code left running (with
      // DF_HANDLER_ISOLATION=none, one that ignores ctx.signal): it must not keep a stopped daemon alive.
      process.exit(await daemon.exited);
    } catch (error) {
      const message = describeStartupFailure(error);
      logger.fatal({ err: error as Error }, `df-worker could not start: ${message}`);
      process.stderr.write(`df-worker: could not start: ${message}\n`);
      return 1;
    }
  },
};
