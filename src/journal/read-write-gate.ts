// Lets many journal writes run at once while a scan of the whole folder runs alone: a scan that overlapped
// a write could read a record just before it is removed and bring a completed execution back to life.

export class ReadWriteGate {
  #shared = 0;
  #exclusive: Promise<void> | undefined;
  #drained: (() => void) | undefined;

  /** Runs `task` alongside other shared tasks, once no exclusive task runs. */
  async shared<T>(task: () => Promise<T>): Promise<T> {
    while (this.#exclusive) await this.#exclusive;
    this.#shared++;
    try {
      return await task();
    } finally {
      this.#shared--;
      if (this.#shared === 0) this.#drained?.();
    }
  }

  /** Runs `task` alone: waits for shared tasks in flight to end; new shared tasks wait for it. */
  async exclusive<T>(task: () => Promise<T>): Promise<T> {
    while (this.#exclusive) await this.#exclusive;
    let release!: () => void;
    this.#exclusive = new Promise<void>((resolve) => (release = resolve));
    try {
      while (this.#shared > 0) await new Promise<void>((resolve) => (this.#drained = resolve));
      this.#drained = undefined;
      return await task();
    } finally {
      this.#exclusive = undefined;
      release();
    }
  }
}
