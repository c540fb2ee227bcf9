// The emulator's v2 file records, as uploads (or the admin surface) make them; it keeps no content.
import type { Clock } from '../clock/clock.ts';

/** The v2 file record the emulator answers; the service does not document its fields. */
export interface EmulatedFile {
  object: 'file';
  id: string;
  name: string;
  size: number;
  contentType: string;
  createdAt: string;
}

export class FileStore {
  readonly #clock: Clock;
  // Insertion order is creation order: the list relies on it.
  readonly #files = new Map<string, EmulatedFile>();
  #sequence = 0;

  constructor(clock: Clock) {
    this.#clock = clock;
  }

  add(name: string, size: number, contentType: string): EmulatedFile {
    const file: EmulatedFile = {
      object: 'file',
      id: `file-${++this.#sequence}`,
      name,
      size,
      contentType,
      createdAt: new Date(this.#clock.now()).toISOString(),
    };
    this.#files.set(file.id, file);
    return file;
  }

  get(id: string): EmulatedFile | undefined {
    return this.#files.get(id);
  }

  /** Every file record, in creation order. */
  list(): EmulatedFile[] {
    return [...this.#files.values()];
  }

  /** Renames the file record or changes its content type; undefined when no file has this id. */
  update(id: string, changes: { name?: string; contentType?: string }): EmulatedFile | undefined {
    const file = this.#files.get(id);
    if (!file) return undefined;
    Object.assign(file, changes);
    return file;
  }

  delete(id: string): boolean {
    return this.#files.delete(id);
  }

  /** Drops every record and restarts ids at `file-1`. */
  reset(): void {
    this.#files.clear();
    this.#sequence = 0;
  }
}
