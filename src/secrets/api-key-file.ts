// The API key read from DF_API_KEY_FILE, kept current while the daemon runs: a mounted Kubernetes Secret is
// replaced in place (the kubelet writes a new timestamped folder and renames a `..data` symlink over the old
// one), an operator may rename a new file over it or write it in place. fs.watch on the file's folder sees
// each of these at once where the platform reports them; a stat every `statEveryMs` catches what a watch
// misses (network file systems, a watch that failed). The service refusing the key (401) reads it again too.
import { watch, type FSWatcher } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import type { EventSink } from '../events/worker-events.ts';
import type { KeyFileRead, KeyFileReadResult } from '../events/service-payloads.ts';
import { keyShapeProblem } from './key-shape.ts';

export type { KeyFileRead, KeyFileReadResult } from '../events/service-payloads.ts';

/** What the service client asks for each request: the key as it stands now. */
export interface ApiKeySource {
  current(): string;
  /** Every key held since start (the current one included), for redaction: an old key may still be echoed. */
  held?(): readonly string[];
}

/** Keys kept for redaction after they were replaced: a few rotations. */
const HELD_KEYS = 8;

export interface ApiKeyFileOptions {
  /** Absolute path of the key file (DF_API_KEY_FILE). */
  path: string;
  /** The key read at start (the config's): kept until the file holds another valid one. */
  initial: string;
  /** How often the file is stat'ed besides the watch, in ms. Default 10 s. */
  statEveryMs?: number;
  /** Whether fs.watch is used besides the stat. Default true; false leaves the stat alone. */
  watch?: boolean;
  /**
   * Where each read that was not for nothing is told (`apiKeyFile`): the key changed, the service refused a
   * key the file still holds, or the file held no usable key. Default: none.
   */
  events?: Pick<EventSink, 'emit'>;
}

export class ApiKeyFile implements ApiKeySource {
  readonly #o: ApiKeyFileOptions;
  #key: string;
  #held: string[];
  #signature: string | undefined;
  #watcher: FSWatcher | undefined;
  #timer: NodeJS.Timeout | undefined;
  /** One read at a time: the one under way, and the one after it (every trigger meanwhile shares it). */
  #reading: Promise<KeyFileReadResult> | undefined;
  #queued: Promise<KeyFileReadResult> | undefined;
  /** When the file was last read, by Date.now(): /readyz says it. */
  #readAt: number | undefined;
  #closed = false;

  constructor(options: ApiKeyFileOptions) {
    this.#o = options;
    this.#key = options.initial;
    this.#held = [options.initial];
  }

  current(): string {
    return this.#key;
  }

  held(): readonly string[] {
    return this.#held;
  }

  get path(): string {
    return this.#o.path;
  }

  /** Wall-clock instant (ms) of the last read, undefined before the first one since start. */
  get readAt(): number | undefined {
    return this.#readAt;
  }

  /** Starts watching the file's folder and stat'ing the file; idempotent. */
  async start(): Promise<void> {
    if (this.#timer || this.#closed) return;
    this.#signature = await this.#stat();
    if (this.#o.watch !== false) this.#watch();
    this.#timer = setInterval(() => void this.#check('stat'), this.#o.statEveryMs ?? 10_000);
    this.#timer.unref();
  }

  #watch(): void {
    try {
      // The folder, not the file: a rename over the file (or of `..data`) replaces the inode a file watch holds.
      this.#watcher = watch(
        path.dirname(this.#o.path),
        { persistent: false },
        () => void this.#check('watch'),
      );
      this.#watcher.on('error', () => this.#watcher?.close());
    } catch {
      this.#watcher = undefined; // the periodic stat still runs
    }
  }

  close(): void {
    this.#closed = true;
    this.#watcher?.close();
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /**
   * Reads the file now (the service refused the key); resolves 'changed' when the key then in use differs
   * from the one at the call (whichever read took it), 'unreadable' when this read found no key.
   */
  async reload(): Promise<KeyFileReadResult> {
    const before = this.#key;
    const read = await this.#read('refused');
    if (read === 'unreadable') return read;
    return this.#key === before ? 'unchanged' : 'changed';
  }

  async #check(trigger: 'watch' | 'stat'): Promise<void> {
    if (this.#closed) return;
    const signature = await this.#stat();
    if (signature === this.#signature && trigger === 'stat') return;
    await this.#read(trigger);
  }

  /**
   * Reads after any read under way, so what it returns was read after the call (a read begun before a write
   * may have seen the file half written); triggers that come while one waits share it.
   */
  #read(trigger: 'watch' | 'stat' | 'refused'): Promise<KeyFileReadResult> {
    if (this.#queued) return this.#queued;
    const before = this.#reading ?? Promise.resolve<KeyFileReadResult>('unchanged');
    const next = before.then(() => {
      this.#queued = undefined;
      const reading = this.#readOnce(trigger);
      this.#reading = reading;
      return reading;
    });
    this.#queued = next;
    return next;
  }

  async #readOnce(trigger: 'watch' | 'stat' | 'refused'): Promise<KeyFileReadResult> {
    this.#signature = await this.#stat();
    let text: string;
    try {
      text = (await readFile(this.#o.path, 'utf8')).trim();
    } catch (error) {
      // Between the kubelet's writes, or a file removed: the key in use stays until a valid one is there.
      const problem = (error as NodeJS.ErrnoException).code ?? 'unreadable';
      this.#tell({ result: 'unreadable', trigger, problem });
      return 'unreadable';
    }
    this.#readAt = Date.now();
    // The checks of start: a key a header cannot carry would turn every request into an error.
    const bad = keyShapeProblem(text, this.#o.path);
    if (bad !== undefined) {
      this.#tell({ result: 'unreadable', trigger, problem: bad });
      return 'unreadable';
    }
    if (text === this.#key) {
      if (trigger === 'refused') this.#tell({ result: 'unchanged', trigger });
      return 'unchanged';
    }
    this.#key = text;
    this.#held = [...this.#held.filter((k) => k !== text), text].slice(-HELD_KEYS);
    this.#tell({ result: 'changed', trigger });
    return 'changed';
  }

  #tell(read: KeyFileRead): void {
    try {
      this.#o.events?.emit('apiKeyFile', read);
    } catch {
      // A listener's failure must not undo the read: the key it took is in use.
    }
  }

  /** Identity and state of what the path names now (the symlinks followed); undefined when absent. */
  async #stat(): Promise<string | undefined> {
    try {
      const s = await stat(this.#o.path, { bigint: true });
      return `${s.dev}:${s.ino}:${s.size}:${s.mtimeNs}:${s.ctimeNs}`;
    } catch {
      return undefined;
    }
  }
}
