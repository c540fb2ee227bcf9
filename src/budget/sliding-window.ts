// Counts sent requests in sliding windows (per second, per minute) exactly: a request is remembered
// until it leaves the longest window, so at most `max(limit)` instants are ever kept (and saved for a restart).

export interface WindowLimit {
  name: string;
  limit: number;
  windowMs: number;
}

export class SlidingWindows {
  readonly #limits: WindowLimit[];
  readonly #marginMs: number;
  readonly #longestMs: number;
  /** Send instants, oldest first. */
  #sent: number[] = [];

  /**
   * @param marginMs added to every window: the service counts arrivals, we count departures, and
   * latency jitter between two requests must not let the service see one more in its window than we did.
   */
  constructor(limits: WindowLimit[], marginMs: number) {
    this.#limits = limits.filter((l) => Number.isFinite(l.limit) && l.limit > 0);
    this.#marginMs = marginMs;
    this.#longestMs = Math.max(0, ...this.#limits.map((l) => l.windowMs)) + marginMs;
  }

  record(nowMs: number): void {
    this.#forget(nowMs);
    // Kept in order: a send restored from an earlier run may lie just after a caller's rounded instant.
    let i = this.#sent.length;
    while (i > 0 && this.#sent[i - 1]! > nowMs) i--;
    this.#sent.splice(i, 0, nowMs);
  }

  /**
   * A send counted at `fromMs` left at `toMs`: it is counted there instead. One no longer counted at `fromMs`
   * (forgotten, or shifted by a step of the clock) is counted at `toMs` all the same: a send too many for at
   * most a window, never one too few.
   */
  move(fromMs: number, toMs: number): void {
    const i = this.#sent.lastIndexOf(fromMs);
    if (i >= 0) this.#sent.splice(i, 1);
    this.record(toMs);
  }

  /** Adds sends made before `nowMs` by an earlier run (restored from the state folder). */
  restore(instants: readonly number[], nowMs: number): void {
    this.#sent = [...this.#sent, ...instants].sort((a, b) => a - b);
    this.#forget(nowMs);
  }

  /** The sends still inside the longest window at `nowMs`, oldest first: what a restart must know. */
  recent(nowMs: number): number[] {
    this.#forget(nowMs);
    return [...this.#sent];
  }

  /** How many requests may be sent together at `nowMs` without any window going over its limit. */
  capacityAt(nowMs: number): number {
    this.#forget(nowMs);
    let room = Infinity;
    for (const l of this.#limits) {
      room = Math.min(room, l.limit - this.#countSince(nowMs - (l.windowMs + this.#marginMs)));
    }
    return Math.max(0, room);
  }

  /** The earliest instant >= now at which one more request fits in every window. */
  nextFreeAt(nowMs: number): number {
    this.#forget(nowMs);
    let at = nowMs;
    for (const l of this.#limits) {
      const span = l.windowMs + this.#marginMs;
      const inWindow = this.#countSince(nowMs - span);
      if (inWindow >= l.limit) {
        // The request that must leave the window for one more to fit.
        const blocker = this.#sent[this.#sent.length - l.limit];
        if (blocker !== undefined) at = Math.max(at, blocker + span);
      }
    }
    return at;
  }

  /** Requests sent in the last `windowMs` (without margin), for metrics. */
  usedIn(windowMs: number, nowMs: number): number {
    return this.#countSince(nowMs - windowMs);
  }

  #countSince(sinceMs: number): number {
    let n = 0;
    for (let i = this.#sent.length - 1; i >= 0 && (this.#sent[i] ?? 0) > sinceMs; i--) n++;
    return n;
  }

  #forget(nowMs: number): void {
    // The wall clock stepped back (NTP, a VM resumed): shift what was sent by the step, as if time had
    // stood still, so the windows stay as full as they really are instead of blocking until the clock
    // catches up (a step back of 15 min would hold every request, reports included, for 15 min).
    // Out-of-order instants by less than a second are callers' rounding, not a step of the clock.
    const newest = this.#sent.at(-1);
    if (newest !== undefined && newest - nowMs > 1_000) {
      const step = newest - nowMs;
      this.#sent = this.#sent.map((at) => at - step);
    }
    const horizon = nowMs - this.#longestMs;
    let drop = 0;
    while (drop < this.#sent.length && (this.#sent[drop] ?? 0) <= horizon) drop++;
    if (drop > 0) this.#sent.splice(0, drop);
  }
}

/** The largest number of instants that fall within any window of `windowMs` (for reports and tests). */
export function maxInWindow(instants: number[], windowMs: number): number {
  const sorted = [...instants].sort((a, b) => a - b);
  let max = 0;
  for (let i = 0, j = 0; j < sorted.length; j++) {
    while (sorted[j]! - sorted[i]! >= windowMs) i++;
    max = Math.max(max, j - i + 1);
  }
  return max;
}
