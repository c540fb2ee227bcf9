// Watches the handlers folder for `df-worker dev` and calls back once edits have settled: an editor's save is
// often several events (write, rename, chmod), and one reload should follow it, not three.
import { watch, type FSWatcher } from 'node:fs';
import { readdir } from 'node:fs/promises';
import path from 'node:path';

export interface HandlerWatchOptions {
  dir: string;
  /** Quiet time after the last event before `onChange` is called, in ms. Default 150. */
  debounceMs?: number;
  /**
   * Called with the files changed (relative to `dir`) once edits settle; never twice at once: events during a
   * call are gathered for the next.
   */
  onChange(files: string[]): Promise<void>;
  /** The folder cannot be watched any more (deleted, too many watches). */
  onError(error: Error): void;
}

export const DEFAULT_DEBOUNCE_MS = 150;

export class HandlerWatch {
  readonly #o: HandlerWatchOptions;
  /** One watcher per folder, by path relative to `dir` ('' for `dir` itself). */
  readonly #watchers = new Map<string, FSWatcher>();
  #pending = new Set<string>();
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;
  #closed = false;
  /** The folders there at the start are watched: a folder found later may hold modules written before its watch. */
  #started = false;
  readonly #ready: Promise<void>;

  constructor(options: HandlerWatchOptions) {
    this.#o = options;
    // Not fs.watch's recursive mode: on Linux it watches each file, and loses one that an editor saves by
    // writing a new file over it (sed -i, vim). A folder's own watch sees those saves.
    this.#watchFolder('');
    this.#ready = this.#watchSubfolders().then(() => {
      this.#started = true;
    });
  }

  /** Resolves once every folder there at the start is watched: edits from then on are seen. */
  ready(): Promise<void> {
    return this.#ready;
  }

  close(): void {
    this.#closed = true;
    clearTimeout(this.#timer);
    for (const watcher of this.#watchers.values()) watcher.close();
    this.#watchers.clear();
  }

  /** Resolves once the reload under way, if any, has ended. */
  async settled(): Promise<void> {
    await this.#running;
  }

  #watchFolder(folder: string): void {
    if (this.#closed || this.#watchers.has(folder)) return;
    const watcher = watch(path.join(this.#o.dir, folder), (_event, name) =>
      this.#event(name === null ? '' : path.join(folder, name.toString())),
    );
    watcher.on('error', (error) => {
      watcher.close();
      this.#watchers.delete(folder);
      // A subfolder removed is no news; the handlers folder itself gone is.
      if (folder === '') this.#o.onError(error);
    });
    this.#watchers.set(folder, watcher);
  }

  /** A helper module in a subfolder is part of the handlers' code too: its folder gets a watch of its own. */
  async #watchSubfolders(folder = ''): Promise<void> {
    let entries;
    try {
      entries = await readdir(path.join(this.#o.dir, folder), { withFileTypes: true });
    } catch {
      return;
    }
    for (const entry of entries) {
      if (!entry.isDirectory() || entry.name === 'node_modules' || entry.name.startsWith('.')) continue;
      const child = path.join(folder, entry.name);
      if (this.#watchers.has(child)) {
        await this.#watchSubfolders(child);
        continue;
      }
      this.#watchFolder(child);
      if (this.#started) await this.#changedBeforeWatch(child);
      await this.#watchSubfolders(child);
    }
  }

  /** The modules already in a folder just watched count as changed. */
  async #changedBeforeWatch(folder: string): Promise<void> {
    const entries = await readdir(path.join(this.#o.dir, folder), { withFileTypes: true }).catch(() => []);
    for (const entry of entries) if (entry.isFile()) this.#event(path.join(folder, entry.name));
  }

  #event(file: string): void {
    if (file !== '' && !isCodeFile(file)) {
      // Perhaps a new subfolder: it needs a watch before the modules written into it can be seen.
      if (path.extname(file) === '') void this.#watchSubfolders();
      return;
    }
    this.#pending.add(file);
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => this.#flush(), this.#o.debounceMs ?? DEFAULT_DEBOUNCE_MS);
  }

  #flush(): void {
    if (this.#closed) return;
    // A subfolder made since may hold modules: watch it (a no-op for folders already watched).
    void this.#watchSubfolders();
    if (this.#running) return; // the running call takes what is pending once it ends
    const files = [...this.#pending].filter((f) => f !== '').sort();
    this.#pending.clear();
    this.#running = this.#o.onChange(files).finally(() => {
      this.#running = undefined;
      if (this.#pending.size > 0) this.#flush();
    });
  }
}

/**
 * A file whose change may change what the handlers do: modules and JSON, not tests (a test edit must not reload
 * the session), editor swap and backup files, or anything under node_modules.
 */
export function isCodeFile(file: string): boolean {
  const parts = file.split(/[\\/]/);
  if (parts.includes('node_modules')) return false;
  const base = path.basename(file);
  if (base.startsWith('.') || base.endsWith('~')) return false;
  if (/\.(test|spec)\./.test(base)) return false;
  return /\.(m?ts|m?js|cjs|cts|json)$/.test(base);
}
