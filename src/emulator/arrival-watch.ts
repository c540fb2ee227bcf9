// How late the emulator may be stamping an arrival. It stamps a request when its event loop gets to it, and a
// stalled or starved process (a busy machine running the tests) gets to a batch at once, closer together than
// the requests came: a client that kept the limits would look as if it broke them. The watch notes the last
// instant the loop was seen free; a request handled after a blind spell may have arrived anywhere in it, and the
// limiter and the busiest-window figures give it the instant in that span that keeps the limits, when one does.
// A real service has no such spell; with none, the span is one tick (10 ms).
import { performance } from 'node:perf_hooks';
import type { Clock } from '../clock/clock.ts';
import type { RequestRecord } from './types.ts';

const TICK_MS = 10;
/** A tick later than this after the one before marks a blind spell between them. */
const LATE_MS = 2 * TICK_MS;

/** An instant read on both clocks: the real one (performance.now()) and the emulator's monotonic one. */
interface Seen {
  real: number;
  clock: number;
}

const NEVER: Seen = { real: -Infinity, clock: -Infinity };

export class ArrivalWatch {
  readonly #clock: Clock;
  /** When the ticker last ran. */
  #tick: Seen;
  /** The latest blind spell, from the last tick before it to the late tick that ended it. */
  #spell = { from: NEVER, to: NEVER };
  #timer: NodeJS.Timeout | undefined;

  constructor(clock: Clock) {
    this.#clock = clock;
    this.#tick = this.#seen();
  }

  start(): void {
    if (this.#timer) return;
    this.#tick = this.#seen();
    this.#timer = setInterval(() => this.#ticked(this.#seen()), TICK_MS).unref();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /**
   * The earliest instant, on the emulator's wall clock that reads `nowMs` now, at which a request handled now
   * may have come. The blind span is real time, and no more than the emulator's clock moved in it: a manual
   * clock that did not move gives none.
   */
  earliest(nowMs: number): number {
    if (!this.#timer) return nowMs;
    const now = this.#seen();
    let from = this.#tick;
    // Still blind (the ticker has not run since), or just out of a spell whose backlog is being handled: the
    // ticker may run before or after that backlog, depending on where the loop stood when it stalled.
    const blind = now.real - this.#tick.real > LATE_MS;
    const spellEnded = blind ? this.#tick.real : now.real;
    if (spellEnded - this.#spell.to.real <= LATE_MS) from = this.#spell.from;
    return nowMs - Math.max(0, Math.min(now.real - from.real, now.clock - from.clock));
  }

  #seen(): Seen {
    return { real: performance.now(), clock: this.#clock.monotonic() };
  }

  #ticked(now: Seen): void {
    if (now.real - this.#tick.real > LATE_MS) {
      // A spell right after another (a backlog that kept the loop busy) extends it.
      const chained = this.#tick.real - this.#spell.to.real <= LATE_MS;
      this.#spell = { from: chained ? this.#spell.from : this.#tick, to: now };
    }
    this.#tick = now;
  }
}

/**
 * The fewest requests the busiest window of `windowMs` can have held, each request placed anywhere between the
 * earliest instant it may have come and the instant it was stamped, in the order stamped: with no blind spell,
 * the busiest window of the stamps themselves. More than a limit here is a limit broken whatever the stalls.
 */
export function busiestWindow(records: readonly RequestRecord[], windowMs: number): number {
  const spans = records
    .map((r) => ({ from: Math.min(r.earliestAt ?? r.at, r.at), to: r.at }))
    .sort((a, b) => a.to - b.to);
  let low = spans.length === 0 ? 0 : 1;
  let high = spans.length;
  while (low < high) {
    const k = Math.floor((low + high) / 2);
    if (fitsWithin(spans, k, windowMs)) high = k;
    else low = k + 1;
  }
  return low;
}

/** Whether the requests can be placed so that no window of `windowMs` holds more than `k` (earliest first). */
function fitsWithin(spans: readonly { from: number; to: number }[], k: number, windowMs: number): boolean {
  const placed: number[] = [];
  for (const [i, span] of spans.entries()) {
    const at = Math.max(span.from, placed[i - 1] ?? -Infinity, (placed[i - k] ?? -Infinity) + windowMs);
    if (at > span.to) return false;
    placed.push(at);
  }
  return true;
}
