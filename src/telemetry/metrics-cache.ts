// /metrics as served: one rendering of the registry at most per interval, shared by every scraper that asks
// meanwhile, so that a flood of scrapes costs the daemon a copy of bytes each, not a walk of every metric.
// Used by http-server.ts; the interval is DF_HTTP_METRICS_RENDER_INTERVAL_MS.

export interface MetricsRenderCacheOptions {
  /** A rendering is served for this long after it started, in ms; 0 renders for every scrape not sharing one. */
  intervalMs: number;
  /** Monotonic time in ms. Default: performance.now(). */
  now?: () => number;
}

export class MetricsRenderCache {
  readonly #render: () => Promise<string>;
  readonly #intervalMs: number;
  readonly #now: () => number;
  /** The latest rendering (or its failure), and when it started. */
  #latest: { body: Promise<Buffer>; startedAt: number } | undefined;
  #rendering = false;

  constructor(render: () => Promise<string>, options: MetricsRenderCacheOptions) {
    this.#render = render;
    this.#intervalMs = options.intervalMs;
    this.#now = options.now ?? (() => performance.now());
  }

  /**
   * The latest rendering while it is younger than the interval or still under way, else a new one. A failed
   * rendering is served as such for the interval too: a flood never makes it render more often.
   */
  body(): Promise<Buffer> {
    const now = this.#now();
    const latest = this.#latest;
    if (latest && (this.#rendering || now - latest.startedAt < this.#intervalMs)) return latest.body;
    this.#rendering = true;
    const body = this.#start().finally(() => (this.#rendering = false));
    // Callers handle the failure; this copy only keeps it from counting as unhandled.
    body.catch(() => undefined);
    this.#latest = { body, startedAt: now };
    return body;
  }

  async #start(): Promise<Buffer> {
    return Buffer.from(await this.#render());
  }
}
