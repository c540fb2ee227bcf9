// Entry of the one-shot thread that imports the handler modules at start, so their top-level code runs with
// the handlers' environment (no secrets) and cannot block, exit or crash the daemon while it loads them.
import { parentPort, workerData } from 'node:worker_threads';
import { HandlersDirectoryError } from '../handlers/load-errors.ts';
import { loadHandlers } from '../handlers/loader.ts';
import type { LoadReport } from './load-handlers.ts';

const { dir } = workerData as { dir: string };
let report: LoadReport;
try {
  const { handlers, errors } = await loadHandlers(dir);
  report = {
    kind: 'loaded',
    handlers: [...handlers.values()].map((h) => ({
      key: h.key,
      description: h.description,
      retryCount: h.retryCount,
      inputKeys: h.inputKeys,
      outputKeys: h.outputKeys,
      ...(h.timeoutMs === undefined ? {} : { timeoutMs: h.timeoutMs }),
      file: h.file,
    })),
    errors: errors.map((e) => ({ file: e.file, reason: e.message.slice(e.file.length + 2) })),
  };
} catch (error) {
  report =
    error instanceof HandlersDirectoryError
      ? { kind: 'directory', message: error.message }
      : { kind: 'failed', message: error instanceof Error ? error.message : String(error) };
}
parentPort?.postMessage(report);
