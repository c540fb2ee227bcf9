// Entry of the one-shot child process that imports the handler modules at start (the folder is its argument),
// so their top-level code runs with the handlers' environment (no secrets) and cannot block, exit or crash the
// daemon while it loads them.
import { EXIT_OK } from '../errors/exit-codes.ts';
import { HandlersDirectoryError } from '../handlers/load-errors.ts';
import { loadHandlers } from '../handlers/loader.ts';
import { saveCompileCache } from './compile-cache.ts';
import type { LoadReport } from './load-handlers.ts';

// The daemon going away (even kill -9) closes the channel: nothing is left to report to.
process.once('disconnect', () => process.exit(EXIT_OK));
const dir = process.argv[2] ?? '';
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
      ...(h.concurrency === undefined ? {} : { concurrency: h.concurrency }),
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
// The handler workers then find the modules compiled (their TypeScript already stripped) in the cache.
saveCompileCache();
process.send?.(report);
