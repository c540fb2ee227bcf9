// Whether the event loop is stalled, for /healthz: a ticker's lateness is how long the loop could not run it.
// A stall over the limit keeps the loop "stalled" for every probe until it has run a recovery time without
// another, so each prober sees it whatever the order in which they ask.
//
// A hand ticker rather than perf_hooks.monitorEventLoopDelay: that histogram measures the same thing (a
// timer's lateness) but says nothing of when a delay happened, so it would need a ticker of its own to date
// stalls for the recovery window.

/** What /healthz reports. */
export interface LoopHealth {
  /** A stall over the limit ended less than the recovery time ago (or is only now ending). */
  stalled: boolean;
  /** While stalled: the longest stall of the episode. Otherwise the longest lag of the last recovery window. */
  lagMs: number;
  /** While stalled: how long the loop must still run without a stall before it counts as healthy, in ms. */
  recoveryLeftMs: number;
}

export interface EventLoopLagOptions {
  /** Lag over this is a stall, in ms. */
  limitMs: number;
  /** After a stall, time the loop must run without another before it is healthy again, in ms. */
  recoveryMs: number;
}

/** The pure core: lags recorded with the time they were measured (any monotonic clock, in ms). */
export class EventLoopLag {
  readonly #o: EventLoopLagOptions;
  /** The current or latest episode of stalls: its longest lag, and when the last one of them ended. */
  #stall: { lagMs: number; endedAt: number } | undefined;
  /** The longest lag lately: replaced by a longer one, or by any once it is older than the recovery time. */
  #peak = { lagMs: 0, at: -Infinity };

  constructor(options: EventLoopLagOptions) {
    this.#o = options;
  }

  record(lagMs: number, at: number): void {
    if (lagMs >= this.#peak.lagMs || at - this.#peak.at > this.#o.recoveryMs) this.#peak = { lagMs, at };
    if (lagMs <= this.#o.limitMs) return;
    const sameEpisode = this.#stall !== undefined && at - this.#stall.endedAt < this.#o.recoveryMs;
    this.#stall = { lagMs: sameEpisode ? Math.max(lagMs, this.#stall!.lagMs) : lagMs, endedAt: at };
  }

  health(at: number): LoopHealth {
    const stall = this.#stall;
    if (stall !== undefined && at - stall.endedAt < this.#o.recoveryMs) {
      return { stalled: true, lagMs: stall.lagMs, recoveryLeftMs: this.#o.recoveryMs - (at - stall.endedAt) };
    }
    const peakIsRecent = at - this.#peak.at <= this.#o.recoveryMs;
    return { stalled: false, lagMs: peakIsRecent ? Math.max(0, this.#peak.lagMs) : 0, recoveryLeftMs: 0 };
  }
}

/**
 * The ticker's period for a stall limit, in ms: a tenth of the limit, so every stall of 1.1 times the limit is
 * seen whatever its phase, and at most a second, so an idle daemon wakes once a second for it, not ten times.
 */
export function tickMsFor(limitMs: number): number {
  return Math.min(1_000, Math.max(10, Math.floor(limitMs / 10)));
}

/** The shell: a ticker that measures its own lateness into an EventLoopLag. */
export class EventLoopLagMonitor {
  readonly tickMs: number;
  readonly #lag: EventLoopLag;
  #lastTick = performance.now();
  readonly #ticker: NodeJS.Timeout;

  constructor(options: EventLoopLagOptions) {
    this.#lag = new EventLoopLag(options);
    const tickMs = tickMsFor(options.limitMs);
    this.tickMs = tickMs;
    // performance.now(), not Date.now(): a wall clock stepped by NTP would read as a stall.
    this.#ticker = setInterval(() => {
      const now = performance.now();
      this.#lag.record(now - this.#lastTick - tickMs, now);
      this.#lastTick = now;
    }, tickMs);
    this.#ticker.unref();
  }

  health(): LoopHealth {
    // A probe read in the same turn as the end of a stall runs before the ticker could measure it.
    const now = performance.now();
    const overdue = now - this.#lastTick - this.tickMs;
    if (overdue > 0) this.#lag.record(overdue, now);
    return this.#lag.health(now);
  }

  stop(): void {
    clearInterval(this.#ticker);
  }
}
