// When work arrives, learnt per task: arrivals and observed time per hour of the week (UTC), so polls can be
// placed where work comes. Each claimed execution's `createdAt` is an exact arrival instant. Hour-of-week
// figures fade by half every week; per-hour-of-day figures (weekdays apart from weekends) fade by half every
// four passes of their hour and are trusted too, so a new or changed pattern is followed within a day or two;
// an hour of the day leans on its neighbours, so a stretch of quiet hours reads quiet from its first pass. Pure
// and serializable: the daemon keeps it in the state folder, so a restart does not forget it, nor how long the
// month's pickups waited (see PickupTally), which the pace's slow share is planned against.
import { PickupTally } from './pickup-tally.ts';
import { add, type Bucket, leaning, neighbourhood, rate, watch } from './rate-estimate.ts';

const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;
const WEEK_MS = 7 * DAY_MS;
const WEEK_HOURS = 168;
/** Half-life of what was learned by hour of the week and of the task's overall rate (in time). */
const WEEK_HALF_LIFE_MS = WEEK_MS;
/** Arrivals closer than this to the one before are one group (a batch enqueued at once). */
const GROUP_GAP_MS = 10_000;
/** Groups this many times larger than chance would make them mean the work comes clustered. */
const CLUSTERED = 1.2;
/**
 * An hour of the day weighs its neighbourhood's rate (see NEIGHBOURS in rate-estimate.ts) as this many hours
 * watched, times the task's batch size: a quiet hour next to a busier one is read from its own passes once it
 * has a few, not lifted towards its neighbour until it differs by more than chance. The measurements behind the
 * constants are in .github/CONTRIBUTING.md, "Pacing: measurement history".
 */
const DAY_PRIOR_HOURS = 1;

interface TaskProfile {
  week: Bucket[];
  day: Bucket[];
  all: Bucket;
  /** Groups of arrivals (`count`: groups started, faded as `all`), for how bursty the task's work is. */
  groups: Bucket;
  /** The latest arrival seen, in ms. */
  lastArrivalAt: number;
  /**
   * Up to when every arrival of the task is known (ms), which its watched time is counted to: under a backlog,
   * hours behind the latest poll. Absent from files written before it was kept (then `observedUntil`).
   */
  seenUntil?: number;
  /** When the task was last polled (ms); absent from files written before it was kept. */
  polledAt?: number;
  /**
   * Since when the task has been watched without a break (ms): an execution created before it was waiting
   * when the watch began (a backlog found at start, or left by a stop), in time not counted as watched, and
   * is no arrival to learn a rate from.
   */
  watchedFrom?: number;
}

/** The saved form (`arrival-profile.json`). */
export interface ArrivalProfileState {
  version: 1;
  /** Up to when time has been counted as observed. */
  observedUntil: number | null;
  tasks: Record<string, TaskProfile>;
  /** How long the month's pickups waited (absent from files written before it was kept). */
  pickups?: unknown;
}

export class ArrivalProfile {
  #tasks = new Map<string, TaskProfile>();
  #observedUntil: number | null = null;
  #pickups = new PickupTally();

  static fromState(state: unknown): ArrivalProfile {
    const profile = new ArrivalProfile();
    if (!isState(state)) return profile;
    profile.#observedUntil = state.observedUntil;
    for (const [key, task] of Object.entries(state.tasks)) profile.#tasks.set(key, task);
    profile.#pickups = PickupTally.fromState(state.pickups);
    return profile;
  }

  /**
   * Takes over what another process learnt (clustered mode: the previous coordinator's profile): its state
   * replaces this one's when it holds one; returns the tasks it knew, 0 when `state` is not a profile.
   */
  adopt(state: unknown): number {
    const other = ArrivalProfile.fromState(state);
    if (other.#tasks.size === 0) return 0;
    this.#tasks = other.#tasks;
    this.#observedUntil = other.#observedUntil;
    this.#pickups = other.#pickups;
    return other.#tasks.size;
  }

  /** How long the month's claimed executions waited. */
  get pickups(): PickupTally {
    return this.#pickups;
  }

  toState(): ArrivalProfileState {
    const pickups = this.#pickups.toState();
    return {
      version: 1,
      observedUntil: this.#observedUntil,
      tasks: Object.fromEntries(this.#tasks),
      ...(pickups ? { pickups } : {}),
    };
  }

  /**
   * Time has come to `nowMs`, and each given task's arrivals are all known up to `throughMs`: the time from
   * where its arrivals were known before up to there is counted as watched, bucket by bucket. A poll that comes
   * back empty knows them up to the poll; one that claims an execution only up to its createdAt, as the
   * service hands out the oldest pending one first: time after it may hold arrivals still waiting, and
   * counting it as watched would read a backlog as quiet hours (see TaskProfile.seenUntil). A gap longer than
   * an hour between two calls (the daemon was not running) is not counted for any task.
   */
  observe(keys: readonly string[], nowMs: number, throughMs = nowMs): void {
    const from = this.#observedUntil;
    // A task first seen now (or kept in a file written before seenUntil was) is known from the last call.
    let start = from ?? nowMs;
    if (from === null || nowMs - from > HOUR_MS) {
      start = nowMs;
      for (const task of this.#tasks.values()) {
        task.seenUntil = nowMs;
        task.watchedFrom = nowMs;
      }
    }
    this.#observedUntil = Math.max(start, nowMs);
    for (const key of keys) {
      const task = this.#task(key);
      task.watchedFrom ??= start;
      let since = (task.seenUntil ??= start);
      const until = Math.min(nowMs, throughMs);
      const polledAt = task.polledAt ?? start;
      task.polledAt = Math.max(polledAt, nowMs);
      // An answer newer than the task's last poll says that what was waiting then is gone: claimed since, or,
      // where more than an hour of it was unknown, more likely gone elsewhere (cancelled, claimed by another
      // client, a month's backlog in the replay) than empty. That hour is not counted.
      if (until > polledAt && polledAt - since > HOUR_MS) since = polledAt;
      if (until <= since) continue;
      task.seenUntil = until;
      for (let t = since; t < until;) {
        const end = Math.min(until, (Math.floor(t / HOUR_MS) + 1) * HOUR_MS);
        const span = end - t;
        add(task.week[hourOfWeek(t)]!, 0, span, nowMs, WEEK_HALF_LIFE_MS);
        watch(task.day[hourOfDay(t)]!, span, nowMs);
        add(task.all, 0, span, nowMs, WEEK_HALF_LIFE_MS);
        t = end;
      }
    }
  }

  /**
   * One execution of `key` became pending at `arrivedAt` (its createdAt), seen at `nowMs`. One created before
   * the task's watch began (see TaskProfile.watchedFrom) is not counted.
   */
  arrival(key: string, arrivedAt: number, nowMs: number): void {
    const task = this.#task(key);
    if (arrivedAt < (task.watchedFrom ?? -Infinity)) return;
    add(task.week[hourOfWeek(arrivedAt)]!, 1, 0, nowMs, WEEK_HALF_LIFE_MS);
    task.day[hourOfDay(arrivedAt)]!.count += 1;
    add(task.all, 1, 0, nowMs, WEEK_HALF_LIFE_MS);
    // Arrivals within seconds of the one before belong to its group (a batch enqueued at once).
    const startsGroup = Math.abs(arrivedAt - task.lastArrivalAt) > GROUP_GAP_MS;
    add(task.groups, startsGroup ? 1 : 0, 0, nowMs, WEEK_HALF_LIFE_MS);
    task.lastArrivalAt = Math.max(task.lastArrivalAt, arrivedAt);
  }

  /**
   * Expected arrivals per hour of `key` in the hour that holds `atMs`: the hour of the week's own figures,
   * leaning on the hour of the day's, that on its neighbouring hours' (see neighbourhood), that on the task's
   * overall rate, and that on `priorPerHour` (the average task's) while each is thin. With `deviations`, the
   * hour's own figures (and its neighbours') are taken that many standard deviations (of their Poisson count)
   * higher: how busy the hour may well be, not only likely is.
   */
  ratePerHour(key: string, atMs: number, priorPerHour = 0, deviations = 0): number {
    const task = this.#tasks.get(key);
    if (!task) return priorPerHour;
    // Work that comes in batches varies by the batch, not by the arrival: an empty hour says less.
    const spread = this.batchSize(key);
    const overall = rate(task.all, priorPerHour, spread);
    const hour = hourOfDay(atMs);
    const near = rate(neighbourhood(task.day, hour), overall, spread, deviations);
    const day = leaning(task.day[hour]!, near, DAY_PRIOR_HOURS * spread, spread, deviations);
    // The hour of the week has one pass a week; the hour of the day (weekdays apart from weekends) one a
    // day: when work moves to other hours, the latter sees it within a day. The higher of the two is taken,
    // so that an hour is never thought quiet while either says work comes in it.
    return Math.max(rate(task.week[hourOfWeek(atMs)]!, day, spread, deviations), day);
  }

  /** Mean arrivals per group (1 for work that arrives one at a time; a batch's size for batches). */
  batchSize(key: string): number {
    const task = this.#tasks.get(key);
    return task ? Math.max(1, task.all.count / Math.max(1, task.groups.count)) : 1;
  }

  /**
   * True when the task's arrivals come in groups more than chance would make them: a Poisson process of its
   * rate puts an arrival within GROUP_GAP_MS of the one before with odds 1 − e^(−rate × gap), so its groups
   * average e^(rate × gap) arrivals. Pairs, batches and bursts read clustered; steady random work does not.
   */
  clustered(key: string): boolean {
    const perMs = this.overallRatePerHour(key) / HOUR_MS;
    return this.batchSize(key) > CLUSTERED * Math.exp(perMs * GROUP_GAP_MS);
  }

  /** Groups of arrivals seen (faded by half a week): each arrival alone, or each batch. */
  groups(key: string): number {
    return this.#tasks.get(key)?.groups.count ?? 0;
  }

  /** The task's arrivals per hour over all hours (fading by half a week), leaning on `priorPerHour`. */
  overallRatePerHour(key: string, priorPerHour = 0): number {
    const task = this.#tasks.get(key);
    return task ? rate(task.all, priorPerHour, 1) : priorPerHour;
  }

  /** The variance of that rate as read from a Poisson count (per hour, squared): count / hours². */
  overallRateVariance(key: string): number {
    const task = this.#tasks.get(key);
    const hours = (task?.all.exposureMs ?? 0) / HOUR_MS;
    return task && hours > 0 ? task.all.count / hours ** 2 : 0;
  }

  /** The task's arrivals seen (faded as its watched time is). */
  arrivals(key: string): number {
    return this.#tasks.get(key)?.all.count ?? 0;
  }

  /** How long the task has been watched (faded as its figures are). */
  watchedMs(key: string): number {
    return this.#tasks.get(key)?.all.exposureMs ?? 0;
  }

  /** Arrivals per hour of an average task: what a task not yet observed is assumed to get. */
  meanRatePerHour(): number {
    let count = 0;
    let exposureMs = 0;
    for (const task of this.#tasks.values()) {
      count += task.all.count;
      exposureMs += task.all.exposureMs;
    }
    return exposureMs > 0 ? (count / exposureMs) * HOUR_MS : 0;
  }

  #task(key: string): TaskProfile {
    let task = this.#tasks.get(key);
    if (!task) {
      const bucket = (): Bucket => ({ count: 0, exposureMs: 0, at: 0 });
      task = {
        week: Array.from({ length: WEEK_HOURS }, bucket),
        day: Array.from({ length: 48 }, bucket),
        all: bucket(),
        groups: bucket(),
        lastArrivalAt: 0,
      };
      this.#tasks.set(key, task);
    }
    return task;
  }
}

/** 0 = Monday 00:00–01:00 UTC … 167 = Sunday 23:00–24:00. */
export function hourOfWeek(ms: number): number {
  // 1970-01-01 was a Thursday: shift so that weeks start on Monday.
  const hours = Math.floor(ms / HOUR_MS) + 3 * 24;
  return ((hours % WEEK_HOURS) + WEEK_HOURS) % WEEK_HOURS;
}

/** The hour of the day (UTC), 0–23 on weekdays and 24–47 on Saturdays and Sundays: the two follow apart. */
function hourOfDay(ms: number): number {
  const hour = ((Math.floor(ms / HOUR_MS) % 24) + 24) % 24;
  return hourOfWeek(ms) >= 5 * 24 ? 24 + hour : hour;
}

function isState(value: unknown): value is ArrivalProfileState {
  if (typeof value !== 'object' || value === null) return false;
  const v = value as Partial<ArrivalProfileState>;
  if (v.version !== 1 || typeof v.tasks !== 'object' || v.tasks === null) return false;
  if (v.observedUntil !== null && typeof v.observedUntil !== 'number') return false;
  const isBucket = (b: unknown) =>
    typeof b === 'object' &&
    b !== null &&
    ['count', 'exposureMs', 'at'].every((k) => Number.isFinite((b as Record<string, unknown>)[k]));
  return Object.values(v.tasks).every(
    (t) =>
      Array.isArray(t.week) &&
      t.week.length === WEEK_HOURS &&
      t.week.every(isBucket) &&
      Array.isArray(t.day) &&
      t.day.length === 48 &&
      t.day.every(isBucket) &&
      isBucket(t.all) &&
      isBucket(t.groups) &&
      typeof t.lastArrivalAt === 'number' &&
      [t.seenUntil, t.polledAt, t.watchedFrom].every((ms) => ms === undefined || Number.isFinite(ms)),
  );
}
