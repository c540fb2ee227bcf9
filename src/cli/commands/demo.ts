// `df-worker demo`: the daemon's main job against the embedded emulator, no account needed. Feeds a stream
// of executions to the example handlers and prints each outcome as the service records it, beside its input.
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError } from '../../config/errors.ts';
import { loadConfig } from '../../config/load.ts';
import { SERVICE_REQUEST_LIMITS, SERVICE_REQUEST_LIMITS_TEXT } from '../../api/service-limits.ts';
import { describeError } from '../../errors/catalogue.ts';
import { busiestWindow, Emulator } from '../../emulator/index.ts';
import { loadHandlersOrThrow } from '../../handlers/loader.ts';
import { createLogger } from '../../telemetry/logger.ts';
import { parseCommandArgs, usageError, wantsHelp, type Command } from '../command.ts';
import { demoInput } from '../demo-feed.ts';
import { outcomeLine } from '../demo-output.ts';
import { describeStartupFailure, runDaemon } from '../run-daemon.ts';
import { EXIT_CONFIG, EXIT_FAILURE, EXIT_OK } from '../../errors/exit-codes.ts';

const DEMO_KEY = 'demo-key';

export const demoCommand: Command = {
  name: 'demo',
  summary: 'run the worker with the handlers against the embedded emulator (no account needed)',
  help: `
Usage: df-worker demo [--executions N] [--interval-ms MS]

Starts the local emulator with the service's limits (${SERVICE_REQUEST_LIMITS_TEXT}), creates a task for every
handler in DF_HANDLERS_DIR (default ./handlers), feeds executions to them, and runs the worker against it,
printing each outcome beside the execution's input (the fifth execution lacks a declared input key, to show
that failure). Logs (JSON) go to stderr at DF_LOG_LEVEL (default warn for the demo).

Options:
  --executions N    exit 0 once N executions are reported (default 0: run until Ctrl-C)
  --interval-ms MS  time between two new executions (default 3000: each costs two or three requests, and the
                    budget allows ${SERVICE_REQUEST_LIMITS.perMinute} a minute)
  -h, --help        this help
`,
  async run(argv) {
    if (wantsHelp(argv, this)) return EXIT_OK;
    const parsed = parseCommandArgs('demo', {
      args: argv,
      options: {
        executions: { type: 'string', default: '0' },
        'interval-ms': { type: 'string', default: '3000' },
      },
    });
    if (typeof parsed === 'number') return parsed;
    const { values } = parsed;
    for (const flag of ['executions', 'interval-ms'] as const) {
      if (!/^\d+$/.test(values[flag])) {
        return usageError('demo', `--${flag} must be a whole number >= 0, got "${values[flag]}"`);
      }
    }
    const wanted = Number(values.executions);
    const intervalMs = Number(values['interval-ms']);

    const stateDir = await mkdtemp(join(tmpdir(), 'df-worker-demo-'));
    const emulator = new Emulator({ apiKeys: [DEMO_KEY] });
    const webhook = createServer((req, res) => {
      req.resume();
      req.on('end', () => res.writeHead(204).end());
    });
    try {
      const url = await emulator.listen(0);
      await new Promise<void>((resolve) => webhook.listen(0, '127.0.0.1', resolve));
      const address = webhook.address();
      const webhookUrl = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}/hook`;
      let config;
      try {
        config = loadConfig({
          env: { DF_LOG_LEVEL: 'warn', ...process.env },
          overrides: {
            'api.url': url,
            'api.key': DEMO_KEY,
            'api.keyFile': '',
            'state.dir': stateDir,
            'tasks.sync': true,
            'http.port': 0,
            'http.host': '127.0.0.1',
          },
        });
      } catch (error) {
        if (error instanceof ConfigError) {
          process.stderr.write(`df-worker: ${describeError(error)}\n`);
          return EXIT_CONFIG;
        }
        throw error;
      }
      // Readable on a terminal like start's (DF_LOG_PRETTY), on stderr: stdout holds the outcomes.
      const logger = createLogger({
        level: config.log.level,
        pretty: config.log.pretty,
        destination: process.stderr,
      });
      const handlers = await loadHandlersOrThrow(config.handlers.dir, { logger });
      const list = [...handlers.values()];
      const say = (line: string) => process.stdout.write(`${line}\n`);
      say(
        `demo: emulator on ${url}, ${list.length} handlers from ${config.handlers.dir}: ${list.map((h) => h.key).join(', ')}`,
      );

      let daemon;
      try {
        daemon = await runDaemon(config, logger, { handlers });
      } catch (error) {
        const message = describeStartupFailure(error);
        process.stderr.write(`df-worker: ${describeError(error, `could not start: ${message}`)}\n`);
        return EXIT_FAILURE;
      }
      const snapshot = daemon.worker.budget?.snapshot();
      if (snapshot) {
        say(
          `demo: budget ${config.budget.perSecond}/s, ${config.budget.perMinute}/min, ${config.budget.perMonth}/month; ` +
            `idle polls every ${(snapshot.idlePaceMs / 1000).toFixed(0)} s across all tasks, so each new execution wakes its task`,
        );
      }

      let fed = 0;
      let printed = 0;
      const seen = new Set<string>();
      const feed = setInterval(() => {
        if (wanted > 0 && fed >= wanted) return;
        const { taskKey, input } = demoInput(fed++, list, webhookUrl);
        const execution = emulator.enqueueExecution(taskKey, input);
        say(`→ ${execution.id} queued for ${taskKey}`);
        // In production a job's earlier step or an operator can do this with POST /wake?task=KEY.
        daemon.worker.wake(taskKey);
      }, intervalMs);
      const watch = setInterval(() => {
        for (const e of emulator.executions()) {
          const report = e.reports[0];
          if (!report || seen.has(e.id)) continue;
          seen.add(e.id);
          printed++;
          say(
            outcomeLine({
              id: e.id,
              taskKey: e.taskKey,
              input: e.input,
              status: report.status,
              output: report.output,
              ...(e.claimedAt ? { tookMs: Date.parse(report.at) - Date.parse(e.createdAt) } : {}),
            }),
          );
        }
        if (wanted > 0 && printed >= wanted) void daemon.stop();
      }, 100);
      const code = await daemon.exited;
      clearInterval(feed);
      clearInterval(watch);
      const requests = emulator.requests();
      const refused = requests.filter((r) => r.status === 429).length;
      const byOperation = new Map<string, number>();
      for (const r of requests) byOperation.set(r.operation, (byOperation.get(r.operation) ?? 0) + 1);
      say(
        `demo: ${printed} executions reported, ${requests.length} requests to the service, ${refused} answered 429, ` +
          `(${[...byOperation].map(([op, n]) => `${op} ${n}`).join(', ')}), ` +
          `busiest second ${busiestWindow(requests, 1_000)}, busiest minute ${busiestWindow(requests, 60_000)}`,
      );
      return code;
    } finally {
      await emulator.close();
      webhook.closeAllConnections();
      await new Promise<void>((resolve) => webhook.close(() => resolve()));
      await rm(stateDir, { recursive: true, force: true });
    }
  },
};
