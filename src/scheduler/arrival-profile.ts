// When work arrives, learnt per task: arrivals and observed time per hour of the week (UTC), so polls can be
// placed where work comes. Each claimed execution's `createdAt` is an exact arrival instant. Hour-of-week
// figures fade by half every week; per-hour-of-day figures (weekdays apart from weekends) fade by half every
// four passes of their hour and are trusted too, so a new or changed pattern is followed within a day or two;
// an hour of the day leans on its neighbours, so a stretch of quiet hours reads quiet from its first pass. Pure
// and serializable: the daemon keeps it in the state folder, so a restart does not forget it, nor how long the
// month's pickups waited (see PickupTally), which the pace's slow share is planned against.
import { PickupTally } from './pickup-tally.ts';

const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;
const WEEK_MS = 7 * DAY_MS;
const WEEK_HOURS = 168;
/** Half-lives of what was learned: hour of the week and the task's overall rate (in time)... */
const WEEK_HALF_LIFE_MS = WEEK_MS;
/**
 * ... and hour of the day, in passes of that hour (weekdays apart from weekends, see `watch`): four weekdays,
 * or two weekends. Measured by bench:pacing (the weekly pattern's p95 ratio to the best fixed poller): 0.72 with
 * four passes, 0.73–0.76 with two or three, 1.00–1.10 with a half-life of two days of time (fewer than two
 * weekdays' passes: the quiet hours' figures rested on one or two arrivals each, too few to rank them).
 */
const DAY_HALF_LIFE_PASSES = 4;
/** How many standard deviations (of a Poisson count) a bucket's count must differ by to be believed. */
const SIGNIFICANCE = 2;
/** Arrivals closer than this to the one before are one group (a batch enqueued at once). */
const GROUP_GAP_MS = 10_000;
/** Groups this many times larger than chance would make them mean the work comes clustered. */
const CLUSTERED = 1.2;
/** Arrivals' worth of the broader estimate a bucket's own figure starts from. */
const PSEUDO = 0.2;
/**
 * An hour of the day leans on the hours this close to it (pooled, weekdays or weekends as it) before the task's
 * overall rate: nights are next to nights, and a night hour after one pass, with no arrival or one, is
 * believed quiet as a stretch of night hours with a few arrivals in all is, where against the overall rate (3
 * an hour after one day of a weekly pattern) it read 2.5 an hour, and half the hours of the week held the
 * quiet hours' share. Measured by bench:pacing, p95 ratio cold: weekly pattern 0.57–0.61 where 0.63–0.67,
 * pattern change 0.57–0.61 where 0.68–0.74, business hours 0.31–0.32 where 0.36–0.39; warm alike. ±2 hours
 * measured the same, but for 0.53–0.58 warm on pattern change (0.52–0.55 with ±1).
 */
const NEIGHBOURS = 1;
/**
 * An hour of the day weighs its neighbourhood's rate as this many hours watched (times the task's batch size,
 * work in batches varying by the batch): a quiet night hour next to a busier one is read from its own passes
 * once it has a few, not lifted towards its neighbour until it differs by two standard deviations (a night
 * hour next to the weekly pattern's 2-an-hour mornings read up to 1.7 an hour where 0.5 come, and the nights'
 * share of the work 20% high). Measured by bench:pacing (with QUIET_SHARE 5%), the weekly pattern's p95 ratio:
 * 0.52–0.58 cold and 0.48–0.53 warm, where 0.57–0.61 and 0.53–0.56; pattern change unchanged (0.57–0.61,
 * 0.52–0.55) and batches within their draws' spread. Half an hour measured alike; 2 hours, with QUIET_SHARE 6%,
 * 0.01 worse than 1 hour.
 */
const DAY_PRIOR_HOURS = 1;

interface Bucket {
  /** Arrivals seen (faded). */
  count: number;
  /** Time observed, in ms (faded alike). */
  exposureMs: number;
  /** When the figures were last faded. */
  at: number;
}

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
   * leaning on the hour of the day's, that on its neighbouring hours' (see NEIGHBOURS), that on the task's
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

/**
 * Arrivals per hour in a bucket, given the broader estimate `prior` (per hour). Arrivals are random: what a
 * bucket saw is only believed as far as it differs from the prior by more than chance would (a Poisson count
 * is within about two square roots of its mean), so an hour with 2 arrivals and one with none, of a task that
 * gets one an hour, both read as one an hour, while an hour that stays empty where 15 were expected, or busy
 * where none were, reads as it is within a pass or two.
 */
function rate(b: Bucket, prior: number, spread: number, deviations = 0): number {
  const hours = b.exposureMs / HOUR_MS;
  // The bucket's own figure, with one pseudo-arrival's worth of the prior.
  const own =
    (prior > 0 ? (b.count + PSEUDO) / (hours + PSEUDO / prior) : b.count / (hours + 1)) +
    (deviations * Math.sqrt(spread * (b.count + 1))) / Math.max(hours, 1e-9);
  const expected = prior * hours;
  // A Poisson count of batches of `spread` arrivals has `spread` times the variance of single arrivals.
  const surprise = (b.count - expected) ** 2 / (SIGNIFICANCE ** 2 * spread * Math.max(expected, 1));
  const weight = Math.min(1, surprise);
  return weight * own + (1 - weight) * prior;
}

/**
 * Arrivals per hour in a bucket that weighs `prior` (per hour) as `priorHours` watched: what it saw, once it
 * has watched a few times as long, whether or not that differs from the prior by more than chance would. With
 * `deviations`, its count is taken that many standard deviations higher.
 */
function leaning(b: Bucket, prior: number, priorHours: number, spread: number, deviations = 0): number {
  const count = b.count + deviations * Math.sqrt(spread * (b.count + 1));
  return (count + prior * priorHours) / (b.exposureMs / HOUR_MS + priorHours);
}

/**
 * Adds watched time to an hour-of-the-day bucket, fading what it held by half every DAY_HALF_LIFE_PASSES hours
 * watched: a bucket forgets as it learns anew, not as time passes, so an hour of the weekday rests on its last
 * four weekdays whatever weekend lies between, and an hour of the weekend on its last two weekends.
 */
function watch(b: Bucket, exposureMs: number, nowMs: number): void {
  const keep = 0.5 ** (exposureMs / (DAY_HALF_LIFE_PASSES * HOUR_MS));
  b.count *= keep;
  b.exposureMs = b.exposureMs * keep + exposureMs;
  b.at = nowMs;
}

function add(b: Bucket, count: number, exposureMs: number, nowMs: number, halfLifeMs: number): void {
  if (nowMs > b.at) {
    const keep = b.at === 0 ? 1 : 0.5 ** ((nowMs - b.at) / halfLifeMs);
    b.count *= keep;
    b.exposureMs *= keep;
    b.at = nowMs;
  }
  b.count += count;
  b.exposureMs += exposureMs;
}

/** The hours of the day within NEIGHBOURS of `hour` (of weekdays, or of weekends, as `hour`), pooled. */
function neighbourhood(day: readonly Bucket[], hour: number): Bucket {
  const base = hour >= 24 ? 24 : 0;
  const pooled: Bucket = { count: 0, exposureMs: 0, at: 0 };
  for (let d = -NEIGHBOURS; d <= NEIGHBOURS; d++) {
    const b = day[base + ((((hour - base + d) % 24) + 24) % 24)]!;
    pooled.count += b.count;
    pooled.exposureMs += b.exposureMs;
  }
  return pooled;
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
