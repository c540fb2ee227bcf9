// A key that changes without a restart: the daemon's side of DF_API_KEY_FILE. The file is read again when it
// changes and after each 401; a new key is used from the next request, and while the old one was refused a
// poll tries the new one at once. Both modes build it in the core, so standalone and clustered behave alike.
import type { Logger } from 'pino';
import type { WorkerConfig } from '../config/schema.ts';
import { ApiKeyFile, type ApiKeySource } from '../secrets/api-key-file.ts';
import type { KeyFileRead, WorkerEvents } from '../events/worker-events.ts';

export class KeyRotation {
  readonly #file: ApiKeyFile | undefined;
  readonly #logger: Logger;
  #keyChanged: (() => void) | undefined;
  /** A 401 seen while a read after the last one is still out: one read answers both. */
  #reloading = false;

  constructor(config: WorkerConfig, logger: Logger, events: WorkerEvents) {
    this.#logger = logger;
    if (config.api.keyFile === '') return;
    this.#file = new ApiKeyFile({
      path: config.api.keyFile,
      initial: config.api.key,
      statEveryMs: config.api.keyFileCheckMs,
      events,
    });
    // Its own file's reads: the only ones told on this emitter.
    events.on('apiKeyFile', (read) => this.#onRead(read));
    events.on('response', ({ status }) => {
      if (status === 401) this.#refused();
    });
  }

  /** Where the client reads the key for each request; undefined with DF_API_KEY (fixed until a restart). */
  get source(): ApiKeySource | undefined {
    return this.#file;
  }

  /** Starts watching the file; `keyChanged` is told when a new key is taken. */
  async start(keyChanged: () => void): Promise<void> {
    this.#keyChanged = keyChanged;
    await this.#file?.start();
  }

  close(): void {
    this.#file?.close();
  }

  /** What /readyz says while the service refuses the key: where the key comes from and what to do. */
  refusedReason(): string {
    const file = this.#file;
    if (!file) {
      return (
        'the service refuses the API key (401): set a valid DF_API_KEY and restart, or use DF_API_KEY_FILE, ' +
        'which is read again when it changes'
      );
    }
    const readAt = file.readAt === undefined ? 'at start' : `at ${new Date(file.readAt).toISOString()}`;
    return (
      `the service refuses the API key (401) read from DF_API_KEY_FILE ${file.path} (last read ${readAt}): ` +
      'write a valid key into that file; it is taken without a restart'
    );
  }

  #refused(): void {
    if (this.#reloading || !this.#file) return;
    this.#reloading = true;
    void this.#file.reload().finally(() => (this.#reloading = false));
  }

  #onRead({ result, trigger, problem }: Readonly<KeyFileRead>): void {
    const path = this.#file!.path;
    if (result === 'changed') {
      this.#logger.info(
        { keyFile: path, trigger },
        'DF_API_KEY_FILE holds a new API key; requests use it from now on',
      );
      this.#keyChanged?.();
    } else if (result === 'unreadable') {
      this.#logger.warn(
        { keyFile: path, trigger, problem },
        'DF_API_KEY_FILE could not be read again; the key in use is kept',
      );
    }
  }
}
