// The HTTP port's answers per second (DF_HTTP_MAX_REQUESTS_PER_SECOND): a token bucket whose requests over the
// rate wait their turn, in order. A client that waits for its answer sends no other, so a flood of the port
// (a scraper gone wrong, a scan) costs the daemon's event loop that many answers a second and no more, and
// leaves the loop free for the pipeline between them. Used by http-server.ts; the connection cap bounds how
// many requests wait (one per connection), and so how long: the cap over the rate.

export interface RequestPacerOptions {
  /** Requests answered per second at most, on average; a second's worth at once after a quiet spell. */
  perSecond: number;
  /** Monotonic time in ms. Default: performance.now(). */
  now?: () => number;
}

export class RequestPacer {
  readonly #perMs: number;
  readonly #burst: number;
  readonly #now: () => number;
  #tokens: number;
  #filledAt: number;
  readonly #waiting: (() => void)[] = [];
  #timer: NodeJS.Timeout | undefined;

  constructor(options: RequestPacerOptions) {
    this.#perMs = options.perSecond / 1_000;
    this.#burst = Math.max(1, options.perSecond);
    this.#now = options.now ?? (() => performance.now());
    this.#tokens = this.#burst;
    this.#filledAt = this.#now();
  }

  /** Undefined when this request may be answered now; else a promise of its turn. */
  turn(): Promise<void> | undefined {
    if (this.#waiting.length === 0 && this.#take()) return undefined;
    return new Promise<void>((resolve) => {
      this.#waiting.push(resolve);
      this.#arm();
    });
  }

  /** Lets every waiting request go (the server is closing). */
  release(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    for (const resolve of this.#waiting.splice(0)) resolve();
  }

  #take(): boolean {
    const now = this.#now();
    this.#tokens = Math.min(this.#burst, this.#tokens + (now - this.#filledAt) * this.#perMs);
    this.#filledAt = now;
    if (this.#tokens < 1) return false;
    this.#tokens -= 1;
    return true;
  }

  #arm(): void {
    if (this.#timer !== undefined) return;
    const waitMs = Math.max(1, Math.ceil((1 - this.#tokens) / this.#perMs));
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      while (this.#waiting.length > 0 && this.#take()) this.#waiting.shift()!();
      if (this.#waiting.length > 0) this.#arm();
    }, waitMs);
  }
}
