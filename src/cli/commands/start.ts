// `df-worker start`: the daemon. Config from DF_* variables and DF_CONFIG; exits 0 after a drained stop. The
// daemon is one core (daemon/core.ts: run() starts, its poll loop claims, stop drains) in a mode: standalone
// (standalone/standalone-mode.ts) or clustered (clustered/clustered-mode.ts), served with probes and signals by
// cli/run-daemon.ts. Only what start needs before the handler modules begin loading is imported here; the
// daemon's own modules load after, beside them (see run()).
import { hostname } from 'node:os';
import { ConfigError } from '../../config/errors.ts';
import type { WorkerConfig } from '../../config/schema.ts';
import type { Tracing } from '../../tracing/sdk.ts';
import { loadConfig } from '../../config/load.ts';
import {
  describeUnknownSetting,
  findUnknownSettings,
  ignoredVariables,
  UNKNOWN_SETTING_CODE,
  unknownSettingWarnings,
} from '../../config/unknown-settings.ts';
import { describeError } from '../../errors/catalogue.ts';
import { EXIT_CONFIG, EXIT_FAILURE, EXIT_OK } from '../../errors/exit-codes.ts';
import { loadHandlersIsolated, logLoadedHandlers } from '../../sandbox/load-handlers.ts';
import { handlerEnvironmentFromConfig } from '../../sandbox/handler-environment.ts';
import { secretValues } from '../../config/secret-settings.ts';
import { tracesEndpoint } from '../../tracing/settings.ts';
import { parseCommandArgs, wantsHelp, type Command } from '../command.ts';
import { cliCommand } from '../invocation.ts';

/** How long after start the compile cache is written, in ms. */
const COMPILE_CACHE_SAVE_DELAY_MS = 2_000;

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
    if (wantsHelp(argv, this)) return EXIT_OK;
    const parsed = parseCommandArgs('start', { args: argv, options: { config: { type: 'string' } } });
    if (typeof parsed === 'number') return parsed;
    const { values } = parsed;
    const env = values.config ? { ...process.env, DF_CONFIG: values.config } : process.env;
    let config;
    let tracingWanted;
    try {
      config = loadConfig({ env, require: 'service' });
      // OpenTelemetry is loaded only when an OTLP endpoint is set (OTEL_EXPORTER_OTLP_ENDPOINT...).
      tracingWanted = tracesEndpoint(process.env) !== undefined;
    } catch (error) {
      if (error instanceof ConfigError) {
        // A misspelt variable is often why a setting reads as missing (DF_API_KYE for DF_API_KEY).
        const warnings = unknownSettingWarnings(env).map((line) => `df-worker: ${line}\n`);
        process.stderr.write(`df-worker: ${describeError(error)}\n${warnings.join('')}`);
        return EXIT_CONFIG;
      }
      throw error;
    }
    // The handler modules load in a process of their own (sandbox/load-handlers.ts). Started before the daemon
    // imports its own modules (the logger's among them), the two run side by side on two cores rather than one
    // after the other: start to first poll with 20 handlers, median of 14 starts from source, 352 ms where 462
    // (bench:footprint --starts 15 --baseline-ref on the code before). What it found is logged once the logger
    // exists, and fails start() as a load by the worker would.
    const loading =
      config.handlers.isolation === 'none'
        ? undefined
        : loadHandlersIsolated(config.handlers.dir, { env: handlerEnvironmentFromConfig(config) });
    // It may fail while the modules below load: handled where the worker awaits it (handlersLoading).
    loading?.catch(() => undefined);
    const [{ createLogger }, { DaemonCore }, mode, { describeStartupFailure, serveDaemon }, cache, tracing] =
      await Promise.all([
        import('../../telemetry/logger.ts'),
        import('../../daemon/core.ts'),
        modeFromConfig(config),
        import('../run-daemon.ts'),
        import('../../sandbox/compile-cache.ts'),
        tracingWanted ? startTracing(config) : undefined,
      ]);
    const logger = createLogger({
      level: config.log.level,
      pretty: config.log.pretty,
      ...(tracing ? { mixin: tracing.logFields } : {}),
    });
    tracing?.useLogger(logger);
    for (const unknown of findUnknownSettings(env, ignoredVariables(env, config))) {
      logger.warn({ code: UNKNOWN_SETTING_CODE, ...unknown }, describeUnknownSetting(unknown));
    }
    const handlersLoading = loading?.then((handlers) => {
      logLoadedHandlers(handlers, logger);
      return handlers;
    });
    handlersLoading?.catch(() => undefined);
    let daemon: InstanceType<typeof DaemonCore> | undefined;
    let shell: Awaited<ReturnType<typeof serveDaemon>> | undefined;
    try {
      const options = {
        config,
        logger,
        taskSyncCommand: cliCommand('tasks sync'),
        ...(handlersLoading ? { handlersLoading } : {}),
        ...(tracing ? { tracing } : {}),
      };
      const core = new DaemonCore(options, mode);
      // Probes answer from before the start on; the daemon is stopped by SIGTERM/SIGINT (serveDaemon).
      shell = await serveDaemon(core, config, logger);
      daemon = core;
      const code = await core.run(() => {
        // Every module of the daemon is loaded once it started; a daemon that is killed rather than stopped keeps
        // them. Not at once: writing the cache of a first start takes some 100 ms, which would hold up the first
        // polls.
        setTimeout(cache.saveCompileCache, COMPILE_CACHE_SAVE_DELAY_MS).unref();
      });
      await shell.close();
      // The daemon has drained; whatever still holds the event loop is handler code left running (with
      // DF_HANDLER_ISOLATION=none, one that ignores ctx.signal): it must not keep a stopped daemon alive.
      await tracing?.shutdown();
      process.exit(code);
    } catch (error) {
      await daemon?.stop().catch(() => undefined);
      await shell?.close();
      const message = describeStartupFailure(error);
      logger.fatal({ err: error as Error }, `df-worker could not start: ${message}`);
      process.stderr.write(`df-worker: ${describeError(error, `could not start: ${message}`)}\n`);
      await tracing?.shutdown();
      return EXIT_FAILURE;
    }
  },
};

/** The daemon's mode: clustered when DF_REDIS_URL is set, its code (BullMQ, ioredis) imported only then. */
async function modeFromConfig(config: WorkerConfig) {
  if (config.cluster.redisUrl === '') {
    const { StandaloneMode } = await import('../../standalone/standalone-mode.ts');
    return new StandaloneMode();
  }
  const { ClusteredMode } = await import('../../clustered/clustered-mode.ts');
  return new ClusteredMode(config);
}

/** The OpenTelemetry SDK, set up from its OTEL_* variables; service.instance.id is the replica id when clustered. */
async function startTracing(config: WorkerConfig): Promise<Tracing> {
  const [{ startTracing }, { redactor }, { version }, instanceId] = await Promise.all([
    import('../../tracing/sdk.ts'),
    import('../../secrets/redact.ts'),
    import('../version.ts'),
    config.cluster.redisUrl === ''
      ? hostname()
      : import('../../clustered/redis.ts').then((m) => m.replicaIdFromConfig(config)),
  ]);
  return startTracing({ redact: redactor(secretValues(config)), instanceId, version });
}
