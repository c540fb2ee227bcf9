// The process around a daemon (its contract: daemon/contract.ts): the health server first (probes answer during
// start-up), SIGTERM/SIGINT to drain, a daemon's own error to exit. `start` runs the core in it (core.run());
// `demo` and `dev` run the standalone daemon in it through runDaemon().
import type { Logger } from 'pino';
import { ConfigError } from '../config/errors.ts';
import type { WorkerConfig } from '../config/schema.ts';
import type { DaemonWorker, WorkerOptions } from '../daemon/contract.ts';
import { standaloneDaemon, type StandaloneDaemon } from '../standalone/standalone-mode.ts';
import { EXIT_INTERNAL_ERROR, EXIT_SECOND_SIGNAL } from '../errors/exit-codes.ts';
import { failCurrentAttempt } from '../runner/attempt-scope.ts';
import { WorkerHttpServer } from '../telemetry/http-server.ts';

/** The process's side of a daemon: its HTTP port and signal handlers. */
export interface DaemonShell {
  http: WorkerHttpServer | undefined;
  /** Where `http` listens, e.g. `http://127.0.0.1:9464`. */
  url: string | undefined;
  /** Where the probe port (DF_HTTP_PROBE_PORT) listens, when it is on. */
  probeUrl: string | undefined;
  /** Closes the HTTP ports (once the daemon has stopped). */
  close(): Promise<void>;
}

export interface RunningDaemon<W extends DaemonWorker = StandaloneDaemon> extends DaemonShell {
  worker: W;
  /** Resolves with the exit code once the worker has stopped and the HTTP port closed. */
  exited: Promise<number>;
  stop(): Promise<void>;
}

/** Prints a start-up failure the way a user needs it: what went wrong, and for config every bad setting. */
export function describeStartupFailure(error: unknown): string {
  if (error instanceof ConfigError) return error.message;
  if (error instanceof AggregateError) {
    // HandlerLoadErrors already lists every file in its message; only what it does not say is added.
    const missing = error.errors
      .map((e: unknown) => (e instanceof Error ? e.message : String(e)))
      .filter((message) => !error.message.includes(message));
    return [error.message, ...missing.map((message) => `  - ${message}`)].join('\n');
  }
  return error instanceof Error ? error.message : String(error);
}

export type DaemonOptions = Partial<WorkerOptions> & {
  http?: boolean;
  signals?: boolean;
  /** Every route of the HTTP port answers loopback Host names only (df-worker dev); else probes answer any. */
  loopbackHostsOnly?: boolean;
};

/** The standalone daemon, served and started (demo, dev); resolves once it runs. */
export async function runDaemon(
  config: WorkerConfig,
  logger: Logger,
  options: DaemonOptions = {},
): Promise<RunningDaemon> {
  const worker = standaloneDaemon({ ...options, config, logger });
  const shell = await serveDaemon(worker, config, logger, options);
  try {
    await worker.start();
  } catch (error) {
    await worker.stop().catch(() => undefined);
    await shell.close();
    throw error;
  }
  let closing: Promise<void> | undefined;
  const closed = () => (closing ??= shell.close());
  const exited = worker.exited.then(async (code) => {
    await closed();
    return code;
  });
  const stop = async () => {
    await worker.stop();
    await closed();
  };
  return { ...shell, worker, exited, stop };
}

/**
 * Serves `worker`'s probes and metrics (before it starts, so that probes answer during start-up) and, unless
 * `signals` is false, drains it on SIGTERM/SIGINT and exits on an error of the daemon's own.
 */
export async function serveDaemon(
  worker: DaemonWorker,
  config: WorkerConfig,
  logger: Logger,
  options: DaemonOptions = {},
): Promise<DaemonShell> {
  let http: WorkerHttpServer | undefined;
  let probes: WorkerHttpServer | undefined;
  let url: string | undefined;
  let probeUrl: string | undefined;
  if (options.http ?? true) {
    // Loaded only when the setting is on, before the worker starts so that its first claim is recorded: with
    // the page off, the daemon never loads its code.
    const statusPage = config.http.statusPage
      ? (await import('../console/status-page.ts')).createStatusPage(worker, {
          showData: config.http.statusPageDetails,
        })
      : undefined;
    const source = {
      readiness: () => worker.readiness(),
      wake: (task?: string) => worker.wake(task),
      metrics: () => worker.metrics.render(),
      metricsContentType: worker.metrics.registry.contentType,
      ...(statusPage ? { statusPage } : {}),
    };
    const hosts = options.loopbackHostsOnly ? 'loopback' : 'probes-any';
    if (config.http.probePort >= 0) {
      // Listening first: the kubelet's startup probe may come before the metrics port is up.
      probes = new WorkerHttpServer(source, {
        port: config.http.probePort,
        host: config.http.host,
        wake: 'off',
        serves: 'probes',
        maxConnections: config.http.maxConnections,
        maxRequestsPerSecond: config.http.maxRequestsPerSecond,
        hosts,
        logger,
      });
      probeUrl = await probes.listen();
      logger.info({ url: probeUrl }, 'serving /healthz and /readyz on the probe port');
    }
    http = new WorkerHttpServer(source, {
      port: config.http.port,
      host: config.http.host,
      wake: config.http.wake,
      wakeToken: config.http.wakeToken,
      metricsRenderIntervalMs: config.http.metricsRenderIntervalMs,
      maxConnections: config.http.maxConnections,
      maxRequestsPerSecond: config.http.maxRequestsPerSecond,
      hosts,
      // One watch of the event loop for both ports' /healthz.
      ...(probes ? { eventLoop: probes.eventLoop } : {}),
      statusHosts: config.http.statusPageHosts
        .split(',')
        .map((name) => name.trim().toLowerCase())
        .filter((name) => name !== ''),
      logger,
    });
    try {
      url = await http.listen();
    } catch (error) {
      await probes?.close();
      throw error;
    }
    logger.info({ url }, 'serving /metrics, /healthz and /readyz');
  }

  if (options.signals ?? true) {
    let signals = 0;
    const onSignal = (signal: NodeJS.Signals) => {
      signals++;
      if (signals > 1) {
        logger.warn({ signal }, 'second signal: exiting now; unreported outcomes stay in the journal');
        process.exit(EXIT_SECOND_SIGNAL);
      }
      logger.info({ signal }, 'signal received: draining');
      void worker.stop();
    };
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
    // Handler code runs in workers of its own (or, with DF_HANDLER_ISOLATION=none, in an attempt scope that
    // takes its stray failures): an error that still reaches the process is the daemon's own, and its state
    // cannot be trusted after it. Exit at once; the journal makes the restart safe.
    const fatal = (error: unknown, origin: string) => {
      if (failCurrentAttempt(error)) return;
      logger.fatal(
        { err: error instanceof Error ? error : new Error(String(error)), origin },
        `${origin} outside handler code: exiting (the journal replays on restart)`,
      );
      process.exit(EXIT_INTERNAL_ERROR);
    };
    process.on('unhandledRejection', (reason) => fatal(reason, 'unhandled rejection'));
    process.on('uncaughtException', (error) => fatal(error, 'uncaught exception'));
  }

  return {
    http,
    url,
    probeUrl,
    close: async () => {
      await Promise.all([http?.close(), probes?.close()]);
    },
  };
}
