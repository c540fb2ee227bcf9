// How long the month's claimed executions waited, as a histogram: how many waited longer than a given time
// is what the pace's slow share is planned against (see PollPlanner). Kept with the arrival profile, so a
// restart in the middle of a month still knows how much of its slow share the month has used.

/** Width of a bin (ms), and how far the bins reach: a wait beyond the last bin is counted in the last. */
const BIN_MS = 1_000;
const BINS = 3_600;

/** The saved form: the month counted and the bins that hold pickups, by index. */
export interface PickupTallyState {
  monthStartsAt: number;
  bins: Record<string, number>;
}

export class PickupTally {
  /** Start of the month counted (ms), or null before the first pickup. */
  #monthStartsAt: number | null = null;
  readonly #bins = new Float64Array(BINS);
  #count = 0;

  static fromState(state: unknown): PickupTally {
    const tally = new PickupTally();
    if (!isState(state)) return tally;
    tally.#monthStartsAt = state.monthStartsAt;
    for (const [index, count] of Object.entries(state.bins)) {
      tally.#bins[Number(index)] = count;
      tally.#count += count;
    }
    return tally;
  }

  toState(): PickupTallyState | undefined {
    if (this.#monthStartsAt === null) return undefined;
    const bins: Record<string, number> = {};
    this.#bins.forEach((count, index) => {
      if (count > 0) bins[index] = count;
    });
    return { monthStartsAt: this.#monthStartsAt, bins };
  }

  /** One execution claimed `waitedMs` after it became pending, in the month that starts at `monthStartsAt`. */
  add(monthStartsAt: number, waitedMs: number): void {
    if (this.#monthStartsAt !== monthStartsAt) {
      this.#monthStartsAt = monthStartsAt;
      this.#bins.fill(0);
      this.#count = 0;
    }
    const bin = Math.min(BINS - 1, Math.max(0, Math.floor(waitedMs / BIN_MS)));
    this.#bins[bin]! += 1;
    this.#count++;
  }

  /** Pickups counted in the month that starts at `monthStartsAt`. */
  count(monthStartsAt: number): number {
    return this.#monthStartsAt === monthStartsAt ? this.#count : 0;
  }

  /** ... of which waited longer than `ms` (the bin that holds `ms` counts in part, its waits spread evenly). */
  countAbove(monthStartsAt: number, ms: number): number {
    if (this.#monthStartsAt !== monthStartsAt || this.#count === 0) return 0;
    const at = Math.max(0, ms / BIN_MS);
    const first = Math.floor(at);
    if (first >= BINS) return 0;
    let above = this.#bins[first]! * (first + 1 - at);
    for (let i = first + 1; i < BINS; i++) above += this.#bins[i]!;
    return above;
  }
}

function isState(value: unknown): value is PickupTallyState {
  if (typeof value !== 'object' || value === null) return false;
  const v = value as Partial<PickupTallyState>;
  if (!Number.isFinite(v.monthStartsAt) || typeof v.bins !== 'object' || v.bins === null) return false;
  return Object.entries(v.bins).every(([index, count]) => {
    const i = Number(index);
    return Number.isInteger(i) && i >= 0 && i < BINS && Number.isFinite(count) && count >= 0;
  });
}
