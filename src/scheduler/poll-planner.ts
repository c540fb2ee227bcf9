// Decides when each task is polled next: earliest-due first (so a busy task cannot starve the others), again
// at once after a poll that found work when more is likely pending, and otherwise at its idle pace. The idle
// pace spends the month's budget evenly over what is left of it, after what the expected work will cost (a
// report per execution, and the re-polls after hits), and places polls where work arrives, as learnt in an
// ArrivalProfile. Every hour of the week gets one common interval (a little shorter in the busiest), which
// minimises the 95th percentile of pickup for the polls the month has, except where a small share of the work
// (the slow share: what keeps the month's pickups slower than the common interval, so far and to come, within
// 5%) may wait longer for a large saving: the quietest hours (polled every `maxPollIntervalMs` when next to
// nothing comes in them, otherwise less often the quieter they are; at the common interval while more work
// comes in them than planned), and, on steady work, the re-polls after hits that would most likely come back
// empty. A cold start's first hours of next to no work wait the longest interval too (see COLD_RATE). Pure and
// synchronous: the daemon's loop and the month replay drive the very same decisions.
import type { Budget } from '../budget/budget.ts';
import { backoffDelayMs, type BackoffOptions } from '../clock/backoff.ts';
import { ArrivalProfile, hourOfWeek } from './arrival-profile.ts';

export interface PollPlannerOptions {
  budget: Budget;
  /** Every task is polled at least this often while the month's budget allows it. Default 15 min. */
  maxPollIntervalMs?: number;
  /** Delay before polling a task again after it handed out work. Default 0. */
  minPollIntervalMs?: number;
  /** Back-off after failed polls (5xx, network): base and cap, in ms. */
  errorBackoff: BackoffOptions;
  /** What is known of when work arrives (e.g. restored from the state folder). Default: nothing yet. */
  profile?: ArrivalProfile;
}

export interface PlannedTask {
  taskId: string;
  key: string;
  nextDueAt: number;
  lastPolledAt: number;
  errorStreak: number;
  /** True when the next poll comes from the idle pace, not from work (a re-poll, a nudge). */
  idleDue: boolean;
  /** Order of the last poll sent and of the last wake: a wake after the poll was sent is still owed. */
  sentSeq: number;
  wokenSeq: number;
}

const HOUR_MS = 3_600_000;
/** The pace is planned again at least this often (the month's usage moves on). */
const REPLAN_MS = HOUR_MS;
/** ... and this often while the profile learns (an arrival changes the rates the plan was made for). */
const RELEARN_MS = 5 * 60_000;
/** Share of the month, released evenly as it passes, that idle polling leaves for work beyond the forecast. */
const FORECAST_MARGIN = 0.005;
/**
 * Requests each execution costs beyond the poll that found it at most: its report and the re-poll after the
 * hit (which finds the next one pending, or nothing).
 */
const REQUESTS_PER_EXECUTION = 2;
/** A quiet hour gets less than this share of the typical arrival's hour rate... */
const QUIET_RATE = 0.25;
/**
 * ... even when its rate is taken this many standard deviations (of its Poisson count) higher: among 168 hours
 * of steady work, a few stay empty for weeks by chance (an hour that expects 4 arrivals gets none 1.8% of the
 * time), and read as quiet they wait the longest interval. Measured by bench:pacing, the hourly workload's
 * warm mean ratio: 0.97–1.00 with 1, 0.98–1.06 with none.
 */
const QUIET_DOUBT = 1;
/**
 * ... taken from the quietest up until they hold this many times the slow share of the arrivals expected (see
 * #slowShare), so that quiet hours wait a few times the common interval rather than the longest one. Work in
 * them then waits a little longer than elsewhere, not 15 minutes, when their share was underestimated. With
 * hours of the day read from their own passes (see DAY_PRIOR_HOURS in arrival-profile.ts) and a slow share of
 * 4%: the weekly pattern's p95 ratio 0.52–0.58 cold and 0.48–0.53 warm at 1.25 (5%), 0.54–0.58 and 0.51–0.53 at
 * 1.5 (the nights shared the slow share with day hours four times as busy, and waited 3 times the common
 * interval rather than 5 or 6). With the slow share planned against the month's pickups, 2 (up to 10%) put the
 * weekly pattern at 0.52–0.54 warm where 0.47–0.49. Before, measured by bench:pacing, the weekly pattern's p95
 * ratio: 0.72 at 6%; 0.79–0.81 at 12% (quiet hours polled so often that the busy ones wait longer); 0.96–0.98 at
 * 4% (with hour-of-day figures faded by time), as quiet hours whose share read low put p95 in their 15-minute
 * tail. With quiet hours by a square-root rule: 5% gave 0.50–0.53 warm but 0.75–0.77 on pattern change cold, 8%
 * 0.55–0.57 warm and 0.68–0.72; 6% 0.52–0.55 and 0.69–0.74. Measured again over 10 draws with the design as it
 * stands, mean p95 ratio cold and warm: the weekly pattern 0.478 and 0.439 at 1.0 (every draw at 0.50 or under),
 * 0.486 and 0.448 at 1.1, 0.495 and 0.462 at 1.25; but at 1.0 the quiet hours wait the longest interval, and the
 * mean pickup rose from 0.56–0.66 of the best fixed poller's to 0.87–1.05, and pattern change's warm p95 to 0.521
 * (one draw 0.61) where 0.505 (1.1: 0.518, its mean up by a fifth). A few percent of p95 is not worth that mean.
 */
const QUIET_SHARE = 1.25;
/**
 * The quietest of them, while together they hold no more than this share, wait the longest interval: hours
 * in which next to nothing comes (a weekend night) then cost next to no polls, where 3 times the common
 * interval spent a tenth of the month on them. Measured by bench:pacing: the weekly pattern's p95 ratio
 * 0.68–0.72 at 0.5% against 0.72–0.77 without; 1% and 2% gained no more and lengthened pattern change's mean.
 */
const FLOOR_SHARE = 0.005;
/**
 * ... and only hours this much quieter than the typical arrival's: where a little work does come (a night
 * at a fortieth of the peak's rate), the longest interval puts it on a cliff when its share reads low.
 * Measured by bench:pacing, the weekly pattern's warm p95 ratio: 0.54–0.58 with 1%, 0.54–0.65 with no limit.
 */
const FLOOR_RATE = 0.01;
/**
 * The share of the month's pickups that may wait longer than the common interval: the 5% that p95 leaves slow.
 * Quiet hours take the slow share first (see quietHours); what they leave, up to MAX_SKIP_SHARE, goes to
 * skipping the re-polls least likely to find work (see repollThresholdMs). The share of the work to come that
 * may be slow is planned against it (see #slowShare): what the month's pickups so far used of it, by how long
 * they waited (PickupTally), is left out, so quiet hours wait longer when the month went as planned and less
 * when more work came in them than forecast, or when the pattern moved. Measured by bench:pacing (5 draws),
 * p95 ratio cold and warm: the weekly pattern 0.51–0.57 and 0.47–0.49, where 0.52–0.58 and 0.48–0.53 with 4% of
 * the work to come held slow whatever the month did; pattern change 0.53–0.58 and 0.49–0.53, where 0.57–0.61 and
 * 0.52–0.55 (with SURGE_ODDS). A fixed share of 4.2% gave the weekly pattern 0.47–0.51 warm, but pattern change
 * up to 0.64 cold.
 */
const SLOW_GOAL = 0.05;
/**
 * The margin for chance: how many standard deviations of the Poisson count of the slow pickups to come are
 * kept from the slow share. Measured, the weekly pattern's warm p95 ratio: 0.47–0.49 with 0.5, 0.47–0.50 with 1.
 */
const SLOW_DOUBT = 0.5;
/**
 * ... and the share of the work to come kept for what is slow outside the quiet hours and skipped re-polls (a
 * poll held back by the per-second or per-minute limit, a busy hour read quiet). What was slow so far is counted
 * as it was. Measured: 0.1% and 0.3% alike within draws (the weekly pattern's warm p95 0.47–0.49, 0.48–0.50).
 */
const SLOW_TAIL = 0.001;
/**
 * The slow share is never planned below this: when the month's pickups were already slower than the goal, a
 * common interval long enough to put them back under it would be paid for by every hour of the month left.
 */
const MIN_SLOW_SHARE = 0.02;
/** Bisection steps for the slow share: (SLOW_GOAL − MIN_SLOW_SHARE) / 2⁷, a quarter of a thousandth. */
const SLOW_SHARE_STEPS = 7;
/** The slow share where it is not planned against the month's pickups (under overload, every pickup is late). */
const SLOW_SHARE = 0.04;
/** Arrivals within this long are counted to tell whether a quiet hour turned busy (see #surging)... */
const SURGE_WINDOW_MS = 30 * 60_000;
/**
 * ... when the hour's planned rate would bring as many this rarely: the hour is then polled at the common
 * interval. Measured by bench:pacing, pattern change's p95 ratio cold: 0.53–0.58 where 0.53–0.62 without
 * (the evening peak, planned quiet, is seen within minutes of its first day, not in a day or two); other
 * workloads alike. Only for tasks whose work is forecast (see PacePlan.forecast): a cold start's first hours
 * under overload drained a backlog and then polled empty at the common interval (8 claims fewer on a draw).
 */
const SURGE_ODDS = 1e-3;
/**
 * ... and once found surging, it stays so while its last SURGE_WINDOW_MS bring as many as the hour's planned
 * rate would this rarely: a lull of twenty minutes in work at 13 an hour left three arrivals in the window, more
 * than once in a thousand, and the next arrivals waited the quiet interval. Measured by bench:pacing over 10
 * draws of pattern change, cold: the new peaks' first day's p95 1.05–1.27 times the old peaks' last week, where
 * 1.05–2.76 without (its sixth draw 39 s where 85 s); 1.05–1.58 at 1%. The month's p95 ratios alike within
 * draws (mean over 10 draws, cold and warm: weekly pattern 0.495 and 0.462 where 0.491 and 0.460, pattern change
 * 0.537 and 0.505 where 0.546 and 0.505).
 */
const SURGE_STAY_ODDS = 0.05;
/** Arrivals kept per task for that. */
const SURGE_MEMORY = 16;
/**
 * At most this share of the work is left slow by skipped re-polls: the rest of the slow share is a margin for the
 * slow work no estimate counts (the first arrivals after a quiet hour, a rate misread). Measured by
 * bench:pacing, 2% keeps business hours' p95 within 10% of never skipping, where 4% cost 15%.
 */
const MAX_SKIP_SHARE = 0.02;
/**
 * Where some hours are quiet, the busiest (at least this share of the typical arrival's hour rate)...
 */
const BUSY_RATE = 0.5;
/**
 * ... are polled this many times as often as the common interval: the month's p95 lands where that interval
 * stood on average, and it moves by a few percent as the month goes (arrivals above or below the forecast,
 * the slow share replanned), so every stretch above the average leaves pickups of the busiest hours over the
 * p95, each of which costs the quiet hours a stretch of polls (a pickup kept under it in a peak at 20 an hour
 * costs a fortieth of the polls one in a night at 0.5 does). Measured by bench:pacing over 10 draws, mean p95
 * ratio cold and warm: the weekly pattern 0.51 and 0.46 where 0.52 and 0.47 without, pattern change 0.55 and
 * 0.50 where 0.56 and 0.51 (its first draw warm: 33.9 s where 35.4 s); 1.06 measured alike. Steady work has
 * no quiet hours and is left alone: a steady hour that read below half the typical rate by chance waited
 * longer than the others (one task an hour: p95 ratio up to 1.01 cold where 1.00).
 */
const BUSY_ROOT = 1.1;
/** Small enough that a quiet hour's interval is always the maximum. */
const QUIET_ROOT = 1e-9;
/**
 * Overload is concluded from the work's rate taken this many standard deviations (of the Poisson count seen)
 * higher: until it is, each hit is re-polled, and under overload that re-poll comes back empty, a request
 * that claims nothing. Measured by bench:pacing, overload's cold start over 5 draws: 2–12 claims fewer than
 * the best fixed poller in hindsight, where 13–46 from the rate as read after 20 minutes (a first hour of 20
 * arrivals at 30 an hour kept it under the line for two hours).
 */
const OVERLOAD_DOUBT = 2;
/**
 * ... once the work has been watched this long: the seconds after a start say nothing of a month (a handler's
 * first executions, queued together by someone trying it, are no overload). Measured by bench:pacing,
 * overload's cold start over 5 draws: 0 to 6 claims more than the best fixed poller with 30 s, where 2 fewer
 * on one draw with a minute and 5 fewer to 4 more with 10 minutes (13 empty polls in its first quarter of an
 * hour). Steady work that the month carries may read as overload from its first arrival, until the next plan
 * (see PacePlan.doubtful): bench:pacing measured no workload's p95 or mean change by it. What was waiting
 * when the watch began is no rate (see ArrivalProfile.arrival): a backlog found at start is drained by
 * re-polls, and read no overload.
 */
const OVERLOAD_WATCH_MS = 30_000;
/** Batches seen before a batched task's rate is projected over the rest of the month in full. */
const FORECAST_GROUPS = 30;
/**
 * ... but half of it is trusted from the first batch: idle polls that spend as if batches were rare run the
 * month's use up to its pace by the first busy days, and from there each batch drains at the idle pace, not
 * the service's. Measured by bench:pacing, batches over 6 draws: mean pickup ≤ 1.11× the best fixed poller's
 * with re-poll (1.67× at worst from nothing trusted; 1.45× and a p95 of 2.45× from full trust at once).
 */
const BATCH_TRUST_MIN = 0.5;
/**
 * Arrivals (or batches) seen before a task's rate is trusted to skip a re-poll: a backlog found at start is
 * no rate, and by the tenth arrival a backlog reads as a batch (always re-polled).
 */
const RATE_GROUPS = 10;
/** A task whose arrivals come this many at a time on average works in batches. */
const BATCHED = 3;
/** How many times as long as a task was watched its rate is projected ahead (a day → the month). */
const FORECAST_REACH = 30;
/** The work is more than the month can carry when idle polls would be left less than this share of it. */
const OVERLOAD_SHARE = 0.05;
/**
 * ... and, once concluded, stays so until they would be left this share: a rate near the limit, read from a
 * few hours of random arrivals, crosses it back and forth, and each crossing back re-polls after every hit,
 * requests that come back empty. Measured by bench:pacing, overload's cold start over 5 draws: 13–46 claims
 * fewer than the best fixed poller in hindsight (0.07–0.23%), where 23–90 (up to 0.45%) without.
 */
const OVERLOAD_EXIT_SHARE = 0.15;

/**
 * A cold start's first hours: a task watched at least this long (and nothing learnt of it before)...
 */
const COLD_AFTER_MS = 4 * HOUR_MS;
/**
 * ... whose arrivals, taken COLD_DOUBT standard deviations (of their Poisson count, at least one arrival) higher,
 * still come at fewer than this many an hour, waits the longest interval (`maxPollIntervalMs`) until it has
 * been watched COLD_UNTIL_MS or COLD_SHARE of the month left, whichever is shorter. With nothing learnt, every
 * hour reads alike and the even spend polls hours of next to no work as often as any (a cold start on the 1st
 * of November, a Sunday, spent 1,327 polls on a day of 3 arrivals where a warm one spent 152–247), and the
 * month has that many fewer for the hours that turn out busy. Where the work was steady after all, the
 * pickups slowed are at most COLD_SHARE of the month's, within the 5% p95 leaves slow (with MAX_SKIP_SHARE's
 * 2%). The first arrival ends it: with one, the rate's upper bound over 4 hours is 0.75 an hour. Measured by
 * bench:pacing over 10 draws, mean p95 ratio cold: the weekly pattern 0.491 where 0.508 (9 draws of 10 at 0.50
 * or under, where 5), business hours 0.314 where 0.32–0.33, pattern change 0.546 where 0.551; steady work
 * unchanged (one an hour reads that quiet only when its first 4 hours bring nothing, 2% of cold starts, and
 * then until its next arrival). From 2 hours at 1 an hour: alike (0.492, 0.533, within pattern change's spread
 * from draw to draw), but one an hour was deferred far more often.
 */
const COLD_RATE = 0.5;
const COLD_DOUBT = 2;
const COLD_UNTIL_MS = 24 * HOUR_MS;
const COLD_SHARE = 0.03;

/** The idle pace as planned at one instant: interval = `scaleMs` / root, clamped. */
interface PacePlan {
  at: number;
  taskCount: number;
  /** Interval of an hour whose root is 1 (ms); Infinity when nothing may be spent. */
  scaleMs: number;
  /** Longest idle interval the budget affords: `maxPollIntervalMs`, or longer when it cannot. */
  longestMs: number;
  /**
   * Each task's weight by hour of the week (1, or next to nothing for a quiet hour), as planned: intervals
   * follow the weights the scale was solved for until the next plan.
   */
  roots: Map<string, Float64Array>;
  /** Each task's expected arrivals per hour, by hour of the week, as planned. */
  rates: Map<string, Float64Array>;
  /**
   * Each task's re-poll threshold by hour of the week (ms): after a hit on an execution that waited less than
   * this, the next is unlikely to be pending and the task waits for its idle pace (0: always re-poll).
   */
  repollAfterMs: Map<string, Float64Array>;
  /**
   * The forecast work costs more than the month has left: each poll then finds work waiting, and a re-poll
   * after a hit would only drain the backlog and come back empty, a request that claims nothing.
   */
  overloaded: boolean;
  /**
   * Overload concluded from a few arrivals' doubt: time without arrivals tells too, and the plan is made
   * again as often as an arrival would make it (an hour's false overload halved the pace of 20 quiet tasks).
   */
  doubtful: boolean;
  /** Planned before any arrival was seen: the first ones make a new plan at once. */
  learning: boolean;
  /**
   * Tasks whose work the plan forecasts in full (steady random arrivals, at a rate trusted for the month):
   * their re-polls are paid for by the plan, which spends more in busy hours than an even spend of the month
   * would (a week's peaks run ahead of it by more than the run-ahead allowance that shrinks with the month),
   * and what they cost beyond it comes out of the idle pace at the next plan. Other tasks' re-polls wait while
   * the month's use runs ahead of its pace (Budget.aheadOfPace). Measured by bench:pacing, the weekly
   * pattern's warm p95 ratio: 0.52–0.55 where 0.53–0.59 with every re-poll held to the even pace.
   */
  forecast: Set<string>;
  /** Tasks in a cold start's first hours of next to no work, polled at the longest interval (see COLD_RATE). */
  deferred: Set<string>;
}

export class PollPlanner {
  readonly profile: ArrivalProfile;
  readonly #budget: Budget;
  readonly #maxPollIntervalMs: number;
  readonly #minPollIntervalMs: number;
  readonly #errorBackoff: BackoffOptions;
  readonly #tasks = new Map<string, PlannedTask>();
  /** The served tasks' keys, as of the last setTasks. */
  #keys: string[] = [];
  #plan: PacePlan | undefined;
  /** Arrivals learnt since the pace was planned. */
  #learnt = 0;
  /** Orders sends and wakes (see PlannedTask.sentSeq). */
  #seq = 0;
  /** Executions claimed since the planner was made: handlers' service calls are forecast per execution. */
  #claims = 0;
  /** The last plan's overload verdict (see OVERLOAD_EXIT_SHARE). */
  #wasOverloaded = false;
  /**
   * Each task's latest arrivals (createdAt, ms), oldest first, and when it was last found surging: a quiet hour
   * that turns busy (see #surging).
   */
  readonly #recent = new Map<string, { arrivals: number[]; surgedAt?: number }>();

  constructor(options: PollPlannerOptions) {
    this.#budget = options.budget;
    this.#maxPollIntervalMs = options.maxPollIntervalMs ?? 900_000;
    this.#minPollIntervalMs = options.minPollIntervalMs ?? 0;
    this.#errorBackoff = options.errorBackoff;
    this.profile = options.profile ?? new ArrivalProfile();
  }

  /** Replaces the set of polled tasks; new ones are due at once, known ones keep their state. */
  setTasks(tasks: { id: string; key: string }[], nowMs: number): void {
    const ids = new Set(tasks.map((t) => t.id));
    for (const id of this.#tasks.keys()) if (!ids.has(id)) this.#tasks.delete(id);
    const keys = new Set(tasks.map((t) => t.key));
    for (const key of this.#recent.keys()) if (!keys.has(key)) this.#recent.delete(key);
    for (const t of tasks) {
      if (!this.#tasks.has(t.id)) {
        this.#tasks.set(t.id, {
          taskId: t.id,
          key: t.key,
          nextDueAt: nowMs,
          lastPolledAt: -Infinity,
          errorStreak: 0,
          idleDue: true,
          sentSeq: 0,
          wokenSeq: 0,
        });
      }
    }
    this.#keys = [...this.#tasks.values()].map((task) => task.key);
    this.#plan = undefined;
  }

  /** The profile changed other than by arrivals (adopted from elsewhere): the pace is planned anew. */
  replan(): void {
    this.#plan = undefined;
  }

  get tasks(): readonly PlannedTask[] {
    return [...this.#tasks.values()];
  }

  /**
   * The task to poll next and when: earliest due, then the one polled least recently; none of `excluded` (task
   * ids whose poll is out).
   */
  next(excluded?: { has(taskId: string): boolean }): PlannedTask | undefined {
    let best: PlannedTask | undefined;
    for (const t of this.#tasks.values()) {
      if (excluded?.has(t.taskId) === true) continue;
      if (
        !best ||
        t.nextDueAt < best.nextDueAt ||
        (t.nextDueAt === best.nextDueAt && t.lastPolledAt < best.lastPolledAt)
      ) {
        best = t;
      }
    }
    return best;
  }

  /**
   * The idle interval of one task at `nowMs` (given its key), or the mean over the tasks (without): the time
   * between two polls that find nothing.
   */
  idleIntervalMs(nowMs: number, key?: string): number {
    const plan = this.#planAt(nowMs);
    if (key !== undefined) return this.#intervalOf(plan, key, nowMs);
    const keys = this.#keys;
    if (keys.length === 0) return this.#budget.idlePaceMs(nowMs);
    const perHour = keys.reduce((sum, k) => sum + HOUR_MS / this.#intervalOf(plan, k, nowMs), 0);
    return (keys.length * HOUR_MS) / perHour;
  }

  /** True when the month's budget cannot poll every task within the configured maximum interval. */
  paceExceedsMaxInterval(nowMs: number): boolean {
    return this.#planAt(nowMs).longestMs > this.#maxPollIntervalMs;
  }

  /** A poll found work: `arrivedAt` is the execution's createdAt (what the profile learns from). */
  onHit(taskId: string, nowMs: number, arrivedAt?: number): void {
    const known = arrivedAt !== undefined && Number.isFinite(arrivedAt);
    const t = this.#polled(taskId, nowMs, known ? arrivedAt : nowMs);
    if (!t) return;
    this.#claims++;
    if (known) {
      this.profile.arrival(t.key, Math.min(arrivedAt, nowMs), nowMs);
      this.profile.pickups.add(this.#budget.month(nowMs).startsAt, nowMs - arrivedAt);
      let recent = this.#recent.get(t.key);
      if (!recent) this.#recent.set(t.key, (recent = { arrivals: [] }));
      recent.arrivals.push(arrivedAt);
      if (recent.arrivals.length > SURGE_MEMORY) recent.arrivals.shift();
      this.#learnt++;
    }
    t.errorStreak = 0;
    // More work may be pending (several may have arrived since the last poll): go again at once, unless the
    // work is more than the month can carry, or the execution arrived so shortly before the poll that another
    // one most likely did not (see repollThresholdMs), or the task's work is not yet forecast (see
    // PacePlan.forecast) and has run ahead of the month's even spend.
    const plan = this.#planAt(nowMs);
    const waitedMs = arrivedAt !== undefined && Number.isFinite(arrivedAt) ? nowMs - arrivedAt : Infinity;
    const unlikely = waitedMs < (plan.repollAfterMs.get(t.key)?.[hourOfWeek(nowMs)] ?? 0);
    const ahead = !plan.forecast.has(t.key) && this.#budget.aheadOfPace(nowMs);
    t.idleDue = unlikely || ahead || plan.overloaded;
    t.nextDueAt = t.idleDue ? this.#idleDueAt(t, nowMs) : nowMs + this.#minPollIntervalMs;
    if (plan.overloaded && arrivedAt !== undefined && Number.isFinite(arrivedAt)) {
      // The service hands out the oldest pending execution: a young one means few are waiting, and a poll
      // that comes back empty is a request that claims nothing. Let the backlog build a little first.
      const idle = t.nextDueAt - nowMs;
      if (nowMs - arrivedAt < 2 * idle) t.nextDueAt = this.#capToMonth(nowMs, nowMs + 1.5 * idle);
    }
    this.#honourWake(t, nowMs);
  }

  onEmpty(taskId: string, nowMs: number): void {
    const t = this.#polled(taskId, nowMs, nowMs);
    if (!t) return;
    t.errorStreak = 0;
    t.idleDue = true;
    t.nextDueAt = this.#idleDueAt(t, nowMs);
    this.#honourWake(t, nowMs);
  }

  /**
   * When a task idle from `nowMs` is due: one idle interval later, but no later than the month's end. Near
   * the end of a spent month the interval can span days; a new month brings a new budget and a new pace.
   */
  #idleDueAt(t: PlannedTask, nowMs: number): number {
    return this.#capToMonth(nowMs, nowMs + this.#intervalOf(this.#planAt(nowMs), t.key, nowMs));
  }

  #capToMonth(nowMs: number, dueAt: number): number {
    return Math.ceil(Math.min(dueAt, Math.max(nowMs, this.#budget.month(nowMs).endsAt)));
  }

  /** True when the forecast work costs more than the month has left (see PacePlan.overloaded). */
  overloaded(nowMs: number): boolean {
    return this.#planAt(nowMs).overloaded;
  }

  /** After a 5xx or network error: the exponential back-off with jitter of every retry, capped. */
  onError(taskId: string, nowMs: number): void {
    const t = this.#polled(taskId, nowMs, -Infinity);
    if (!t) return;
    t.idleDue = true;
    t.errorStreak++;
    // One step further up than handler attempts and reports (the first failed poll waits up to twice the base),
    // as polls always have: a failed poll is owed to no one, so waiting a little longer loses nothing.
    t.nextDueAt = nowMs + backoffDelayMs(t.errorStreak + 1, this.#errorBackoff);
    this.#honourWake(t, nowMs);
  }

  /** Call as a poll of the task is sent: a wake() after this is not answered by that poll. */
  sending(taskId: string): void {
    const t = this.#tasks.get(taskId);
    if (t) t.sentSeq = ++this.#seq;
  }

  /** Delays a task without counting a poll (the request was not sent, e.g. budget or backpressure). */
  postpone(taskId: string, untilMs: number): void {
    const t = this.#tasks.get(taskId);
    if (t && t.nextDueAt < untilMs) t.nextDueAt = untilMs;
  }

  /** Makes one task (or all) due now: an operator's or a job's nudge. */
  wake(nowMs: number, taskKey?: string): number {
    let woken = 0;
    for (const t of this.#tasks.values()) {
      if (taskKey === undefined || t.key === taskKey) {
        t.nextDueAt = Math.min(t.nextDueAt, nowMs);
        t.idleDue = false;
        t.wokenSeq = ++this.#seq;
        woken++;
      }
    }
    return woken;
  }

  /**
   * A wake that came while the task's poll was in flight asked for a poll after it: planning from that
   * poll's answer alone would put it off by an idle interval and lose the nudge.
   */
  #honourWake(t: PlannedTask, nowMs: number): void {
    if (t.wokenSeq > t.sentSeq) {
      t.nextDueAt = Math.min(t.nextDueAt, nowMs);
      t.idleDue = false;
    }
  }

  /**
   * A poll of the task was answered at `nowMs`, which tells its arrivals up to `seenThroughMs` (see
   * ArrivalProfile.observe): up to the poll when it came back empty, up to the claimed execution's createdAt
   * after a hit, none after an error.
   */
  #polled(taskId: string, nowMs: number, seenThroughMs: number): PlannedTask | undefined {
    const t = this.#tasks.get(taskId);
    if (t) {
      t.lastPolledAt = nowMs;
      this.profile.observe([t.key], nowMs, seenThroughMs);
    }
    return t;
  }

  #intervalOf(plan: PacePlan, key: string, nowMs: number): number {
    if (!Number.isFinite(plan.scaleMs) || plan.deferred.has(key)) return plan.longestMs;
    let root = plan.roots.get(key)?.[hourOfWeek(nowMs)] ?? 1;
    if (root < 1 && plan.forecast.has(key) && this.#surging(plan, key, nowMs)) root = 1;
    const minimumMs = this.#budget.minimumIntervalMs * plan.taskCount;
    return Math.min(plan.longestMs, Math.max(minimumMs, plan.scaleMs / root));
  }

  /**
   * True when the task's arrivals of the last SURGE_WINDOW_MS are more than the hour's planned rate would
   * bring but once in a thousand times: the hour was planned quiet and is not (work moved to it, or a rate
   * was misread), and waiting its quiet interval would leave every arrival of it slow until the profile
   * learns, a day or two later. Found so within the last SURGE_WINDOW_MS, once in twenty (SURGE_STAY_ODDS).
   */
  #surging(plan: PacePlan, key: string, nowMs: number): boolean {
    const recent = this.#recent.get(key);
    if (!recent) return false;
    const count = recent.arrivals.filter((at) => at > nowMs - SURGE_WINDOW_MS).length;
    const rate = plan.rates.get(key)?.[hourOfWeek(nowMs)] ?? 0;
    const was = recent.surgedAt !== undefined && nowMs - recent.surgedAt <= SURGE_WINDOW_MS;
    const odds = poissonTail(count, (rate * SURGE_WINDOW_MS) / HOUR_MS);
    const surging = odds < (was ? SURGE_STAY_ODDS : SURGE_ODDS);
    if (surging) recent.surgedAt = nowMs;
    return surging;
  }

  #planAt(nowMs: number): PacePlan {
    const plan = this.#plan;
    if (
      plan &&
      nowMs >= plan.at &&
      nowMs - plan.at <
        (this.#learnt > 0 ? (plan.learning ? 0 : RELEARN_MS) : plan.doubtful ? RELEARN_MS : REPLAN_MS) &&
      plan.taskCount === this.#tasks.size
    ) {
      return plan;
    }
    this.#learnt = 0;
    this.#plan = this.#planPace(nowMs);
    return this.#plan;
  }

  /**
   * Plans the idle pace for the rest of the month: what idle polls may spend (the month left, less the report
   * reserve, the forecast work and a margin), spread over the hours left: every task polled at the same
   * interval except in its quiet hours (see quietHours), and at least every `maxPollIntervalMs`. The slow
   * share the quiet hours leave goes to skipping unlikely re-polls, whose saving is spent on polls in turn.
   */
  #planPace(nowMs: number): PacePlan {
    const keys = this.#keys;
    const taskCount = Math.max(1, keys.length);
    const month = this.#budget.month(nowMs);
    const monthMs = month.endsAt - month.startsAt;
    const leftMs = Math.max(0, month.endsAt - nowMs);
    const meanPerHour = this.profile.meanRatePerHour();
    // Hours left, grouped by hour of the week: a task's expected rate depends on nothing else.
    const hoursLeft = new Array<number>(168).fill(0);
    for (let t = nowMs; t < month.endsAt;) {
      const end = Math.min(month.endsAt, (Math.floor(t / HOUR_MS) + 1) * HOUR_MS);
      hoursLeft[hourOfWeek(t)]! += (end - t) / HOUR_MS;
      t = end;
    }
    // Overload is a rate sustained beyond what the month can carry, not a busy hour or a burst: each task's
    // overall rate (fading by half a week), as if it held to the month's end.
    // Work that comes in batches is left out: one batch is no rate, and a re-poll after a hit is what drains
    // a batch at the service's pace (the run-ahead allowance still keeps that to the month's).
    // Their sum is taken OVERLOAD_DOUBT standard deviations higher: the tasks' counts are independent, so their
    // variances add (a doubt per task would add up to a false overload on many quiet tasks), and at least one
    // arrival is counted over the time watched, so that a quiet start is not read as a certain zero.
    const steadyKeys = keys.filter((key) => this.profile.batchSize(key) < BATCHED);
    const sumRate = steadyKeys.reduce(
      (sum, key) => sum + this.profile.overallRatePerHour(key, meanPerHour),
      0,
    );
    const watchedMs = Math.max(0, ...keys.map((k) => this.profile.watchedMs(k)));
    const variance = Math.max(
      steadyKeys.reduce((sum, key) => sum + this.profile.overallRateVariance(key), 0),
      watchedMs > 0 ? (HOUR_MS / watchedMs) ** 2 : 0,
    );
    const sustained = (sumRate + OVERLOAD_DOUBT * Math.sqrt(variance)) * (leftMs / HOUR_MS);
    const buckets: PaceBucket[] = [];
    for (const key of keys.length > 0 ? keys : ['']) {
      // A rate watched for minutes is no month's forecast: it is projected FORECAST_REACH times as far ahead
      // as it was watched, until that covers the month.
      // For work in batches, what a few batches said is no rate either: trusted as FORECAST_GROUPS are seen.
      const batched = this.profile.batchSize(key) >= BATCHED;
      // Skipping a re-poll rests on the task's rate, and on arrivals that come one at a time at random: a few
      // arrivals (or a backlog found at start) are no rate yet, and where work comes in pairs or bursts a hit
      // says the rest of its group is pending.
      const random = this.profile.groups(key) >= RATE_GROUPS && !this.profile.clustered(key);
      const trust = Math.min(
        1,
        (FORECAST_REACH * this.profile.watchedMs(key)) / Math.max(1, leftMs),
        batched ? Math.max(BATCH_TRUST_MIN, this.profile.groups(key) / FORECAST_GROUPS) : 1,
      );
      for (let h = 0; h < 168; h++) {
        // Any instant in that hour of the week: the profile reads nothing else from it.
        const at = nowMs + ((h - hourOfWeek(nowMs) + 168) % 168) * HOUR_MS;
        const rate = this.profile.ratePerHour(key, at, meanPerHour);
        buckets.push({
          key,
          hour: h,
          rate,
          quietRate: this.profile.ratePerHour(key, at, meanPerHour, QUIET_DOUBT),
          hours: hoursLeft[h]!,
          trust,
          batched,
          random,
          root: 1,
          repollAfterMs: 0,
        });
      }
    }
    // Batches come when they come: an hour no batch came in yet is no quieter than the others; and a batch
    // is drained by re-polls, none of which is skipped.
    const steady = buckets.filter((b) => !b.batched);
    const left = month.remaining - this.#budget.reportReserve;
    const margin = FORECAST_MARGIN * month.limit * (leftMs / monthMs);
    // Handlers' own service calls (ctx.service) are work too: as many per execution as they have made so far.
    const callsPerExecution = this.#claims >= RATE_GROUPS ? this.#budget.sent('handler') / this.#claims : 0;
    // The verdict holds until the month has room by OVERLOAD_EXIT_SHARE once it rests on a rate (RATE_GROUPS
    // arrivals seen): the first minutes' doubt alone can read overload, and must not keep it.
    const seen = steadyKeys.reduce((sum, key) => sum + this.profile.groups(key), 0);
    const overloadShare = this.#wasOverloaded && seen >= RATE_GROUPS ? OVERLOAD_EXIT_SHARE : OVERLOAD_SHARE;
    const overloaded =
      left - (REQUESTS_PER_EXECUTION + callsPerExecution) * sustained - margin < overloadShare * left &&
      watchedMs >= OVERLOAD_WATCH_MS;
    this.#wasOverloaded = overloaded;
    const floorPolls = (leftMs / this.#maxPollIntervalMs) * taskCount;
    // The common interval a slow share would give, before skipped re-polls (see #slowShare).
    const unskipped = buckets.reduce(
      (sum, b) => sum + b.rate * b.hours * b.trust * (REQUESTS_PER_EXECUTION + callsPerExecution),
      0,
    );
    const firstSpend = Math.max(left - unskipped - margin, OVERLOAD_SHARE * left);
    // Where no hour holds a share of the work among the quiet ones (steady work), every share gives the same.
    let sameForAll: number | undefined;
    const intervalAt = (share: number) => {
      if (sameForAll !== undefined) return sameForAll;
      for (const b of steady) b.root = 1;
      const used = quietHours(steady, share);
      const weights = buckets.filter((b) => b.hours > 0).map((b) => ({ weight: b.hours, root: b.root }));
      const intervalMs = solveScale(weights, firstSpend, this.#maxPollIntervalMs);
      if (used === 0) sameForAll = intervalMs;
      return intervalMs;
    };
    const paced = !overloaded && firstSpend > floorPolls && leftMs > 0;
    const slowShare = paced ? this.#slowShare(month.startsAt, buckets, intervalAt) : SLOW_SHARE;
    for (const b of steady) b.root = 1;
    const quietShare = quietHours(steady, slowShare);
    const skipShare = Math.min(MAX_SKIP_SHARE, Math.max(0, slowShare - quietShare));
    const roots = buckets.filter((b) => b.hours > 0).map((b) => ({ weight: b.hours, root: b.root }));
    const forecast = new Set(buckets.filter((b) => b.random && !b.batched && b.trust >= 1).map((b) => b.key));
    const doubtful = overloaded && seen < RATE_GROUPS;
    const deferred = new Set(keys.filter((key) => this.#coldAndQuiet(key, leftMs)));
    const base = {
      at: nowMs,
      taskCount,
      overloaded,
      doubtful,
      learning: meanPerHour === 0,
      forecast,
      deferred,
    };
    // The re-polls skipped depend on the interval, and the interval on what the skipped re-polls leave to
    // spend: a few rounds settle it (each changes the spend by a fraction of the one before).
    let plan: PacePlan | undefined;
    for (let round = 0; round < 3; round++) {
      // Each execution costs its report, its handler's calls and, unless skipped, a re-poll.
      const forecast = buckets.reduce(
        (sum, b) =>
          sum +
          b.rate *
            b.hours *
            b.trust *
            (REQUESTS_PER_EXECUTION + callsPerExecution - skippedShare(b, plan, this.#maxPollIntervalMs)),
        0,
      );
      // Work beyond what the month can carry (overload) still needs polls to be claimed: half of what is left
      // then goes to polls (each brings a report), and the month's pace (the budget's gate) holds them to it.
      const idleShare = left - forecast - margin;
      const spendable = overloaded ? left / 2 : Math.max(idleShare, OVERLOAD_SHARE * left);
      if (spendable < 1 || leftMs === 0) {
        plan = { ...base, ...byKey(buckets), scaleMs: Infinity, longestMs: Math.max(1, leftMs) };
        break;
      }
      if (spendable <= floorPolls) {
        // Not even one poll per task every maxPollIntervalMs: every task at the same, longer interval.
        plan = { ...base, ...byKey(buckets), scaleMs: Infinity, longestMs: (leftMs * taskCount) / spendable };
        break;
      }
      const scaleMs = solveScale(roots, spendable, this.#maxPollIntervalMs);
      const minimumMs = this.#budget.minimumIntervalMs * taskCount;
      for (const b of steady) {
        const intervalMs = Math.min(this.#maxPollIntervalMs, Math.max(minimumMs, scaleMs / b.root));
        const skips = b.random && b.root >= 1 && !overloaded;
        b.repollAfterMs = skips ? repollThresholdMs(b.rate, intervalMs, skipShare) : 0;
      }
      plan = { ...base, ...byKey(buckets), scaleMs, longestMs: this.#maxPollIntervalMs };
    }
    return plan!;
  }

  /** True in a cold start's first hours while next to no work comes (see COLD_RATE). */
  #coldAndQuiet(key: string, leftMs: number): boolean {
    const watchedMs = this.profile.watchedMs(key);
    if (watchedMs < COLD_AFTER_MS || watchedMs >= Math.min(COLD_UNTIL_MS, COLD_SHARE * leftMs)) return false;
    const count = this.profile.arrivals(key);
    return (count + COLD_DOUBT * Math.sqrt(Math.max(1, count))) / (watchedMs / HOUR_MS) < COLD_RATE;
  }

  /**
   * The share of the work left in the month that may wait longer than the common interval: what keeps the
   * month's slow pickups (those that waited longer than it, so far and to come) within SLOW_GOAL, less a margin
   * for the chance in how many come in quiet hours (SLOW_DOUBT standard deviations of their Poisson count)
   * and for the others' tail (SLOW_TAIL). A longer common interval leaves fewer of the past pickups slow, a
   * larger slow share makes it shorter: the largest share that holds is found by bisection, between
   * MIN_SLOW_SHARE and SLOW_GOAL. `intervalAt` gives the common interval planned with a share.
   */
  #slowShare(
    monthStartsAt: number,
    buckets: readonly PaceBucket[],
    intervalAt: (share: number) => number,
  ): number {
    const expected = buckets.reduce((sum, b) => sum + b.rate * b.hours, 0);
    if (expected <= 0) return MIN_SLOW_SHARE;
    const pickups = this.profile.pickups;
    const allowed = SLOW_GOAL * (pickups.count(monthStartsAt) + expected) - SLOW_TAIL * expected;
    const holds = (share: number) => {
      const slowSoFar = pickups.countAbove(monthStartsAt, intervalAt(share));
      const toCome = share * expected;
      return slowSoFar + toCome + SLOW_DOUBT * Math.sqrt(toCome) <= allowed;
    };
    if (holds(SLOW_GOAL)) return SLOW_GOAL;
    let low = MIN_SLOW_SHARE;
    if (!holds(low)) return low;
    let high = SLOW_GOAL;
    for (let i = 0; i < SLOW_SHARE_STEPS; i++) {
      const mid = (low + high) / 2;
      if (holds(mid)) low = mid;
      else high = mid;
    }
    return low;
  }
}

/** One task's hour of the week, as planned. */
interface PaceBucket {
  key: string;
  hour: number;
  /** Expected arrivals per hour. */
  rate: number;
  /** ... taken QUIET_DOUBT standard deviations higher: the rate an hour must be quiet by. */
  quietRate: number;
  /** Hours of it left in the month. */
  hours: number;
  /** How far its rate is trusted as the month's forecast (0–1). */
  trust: number;
  batched: boolean;
  /** Its task's arrivals come one at a time at random, at a known rate: a re-poll may be skipped. */
  random: boolean;
  /** Weight of its polls: 1, or less in a quiet hour (its interval is the common one / root). */
  root: number;
  /** See PacePlan.repollAfterMs. */
  repollAfterMs: number;
}

function byKey(buckets: readonly PaceBucket[]): Pick<PacePlan, 'roots' | 'repollAfterMs' | 'rates'> {
  const roots = new Map<string, Float64Array>();
  const repollAfterMs = new Map<string, Float64Array>();
  const rates = new Map<string, Float64Array>();
  for (const b of buckets) {
    let r = roots.get(b.key);
    let s = repollAfterMs.get(b.key);
    let q = rates.get(b.key);
    if (!r) roots.set(b.key, (r = new Float64Array(168)));
    if (!s) repollAfterMs.set(b.key, (s = new Float64Array(168)));
    if (!q) rates.set(b.key, (q = new Float64Array(168)));
    r[b.hour] = b.root;
    s[b.hour] = b.repollAfterMs;
    q[b.hour] = b.rate;
  }
  return { roots, repollAfterMs, rates };
}

/** P(N ≥ k) for N Poisson with mean `mean`. */
function poissonTail(k: number, mean: number): number {
  let term = Math.exp(-mean);
  let below = 0;
  for (let i = 0; i < k; i++) {
    below += term;
    term *= mean / (i + 1);
  }
  return Math.max(0, 1 - below);
}

/**
 * The share of a bucket's hits whose re-poll is skipped, as last planned: a hit's execution waited a time
 * spread evenly over the interval, so the share is the threshold's part of it.
 */
function skippedShare(b: PaceBucket, plan: PacePlan | undefined, maxMs: number): number {
  if (!plan || b.repollAfterMs === 0 || !Number.isFinite(plan.scaleMs)) return 0;
  const intervalMs = Math.min(maxMs, plan.scaleMs / b.root);
  return Math.min(1, b.repollAfterMs / intervalMs);
}

/**
 * After a hit on an execution that waited `w` ms, the next one is pending with probability 1 − e^(−λw) ≈ λw
 * (λ the rate, arrivals being Poisson); skipping the re-poll leaves it one interval T slower. With w spread
 * evenly over [0, T], skipping below a wait x leaves λx²/(2T) of the hits' executions slow and saves x/T of
 * the re-polls, cheapest first: x = √(2 × T × slowShare / λ), at most T.
 */
function repollThresholdMs(ratePerHour: number, intervalMs: number, slowShare: number): number {
  if (slowShare <= 0) return 0;
  const perMs = ratePerHour / HOUR_MS;
  if (perMs <= 0) return intervalMs;
  return Math.min(intervalMs, Math.sqrt((2 * intervalMs * slowShare) / perMs));
}

/**
 * Marks the quiet hours of the week (per task) and returns the slow share they use: the quietest, each
 * expected to get less than a quarter of the typical arrival's hour (even with some doubt, see QUIET_DOUBT),
 * until they hold QUIET_SHARE times `slowShare` of the work expected. Every other hour gets the same interval
 * (the busiest a little shorter, see BUSY_ROOT). For the 95th percentile of pickup the best use of a number
 * of polls is all-or-nothing by hour: an arrival in a quiet hour may be among the slowest 5%, one in any
 * other waits at most the common interval (a square-root rule over all hours would minimise the mean instead,
 * and leave the busier off-peak hours, where p95 is decided, long intervals). Quiet hours holding up to
 * `slowShare` of the work wait the longest interval; holding more, the quietest up to FLOOR_SHARE (of next to
 * no work, see FLOOR_RATE) still do, and the others get intervals in proportion to their rates, root = min(1,
 * c × rate), with c such that `slowShare` of the work waits longer than the common interval: a pickup 1 /
 * root times as long leaves share × (1 − root) of it slower. Among quiet hours the rates are too uncertain to
 * rank for all-or-nothing; in proportion leans towards it, as each poll saved in an hour costs pickups slowed
 * in proportion to its rate (a poll saved in a night at 0.5 an hour slows a quarter as many pickups as one
 * saved in an evening at 2). Measured by bench:pacing over 10 draws, p95 ratio: the weekly pattern 0.45–0.49
 * warm and 0.49–0.55 cold where by a square-root rule 0.46–0.50 and 0.50–0.57, pattern change alike
 * (0.49–0.55 warm, 0.52–0.62 cold), other workloads unchanged; the time-varying workloads' mean ratios rise
 * by 0.03 to about 0.6. A power of 1.5 gained no more p95 and put the means 0.08 up. One interval for all
 * quiet hours gave 0.55–0.65 warm where the square-root rule 0.54–0.58, in an earlier design. Rates from a
 * short or even history are all alike: then nothing is quiet.
 */
function quietHours(buckets: PaceBucket[], slowShare: number): number {
  const quietShare = slowShare * QUIET_SHARE;
  // Shares of a week's work (each hour of the week once), not of the hours left in the month: the slow 5% is
  // the month's, and in its last days the hours left are no week's mix (a weekend and a Monday make the
  // weekend's hours a larger share, and polled more often, at the cost of the Friday before). Measured by
  // bench:pacing, the weekly pattern's p95 ratio: 0.63–0.67 cold and 0.52–0.55 warm, 0.64–0.68 and 0.53–0.56
  // from the hours left.
  const mass = (b: PaceBucket) => b.rate;
  const total = buckets.reduce((sum, b) => sum + mass(b), 0);
  if (total <= 0) return 0;
  const typical = buckets.reduce((sum, b) => sum + b.rate * mass(b), 0) / total;
  const quiet: PaceBucket[] = [];
  let share = 0;
  let floorShare = 0;
  for (const b of buckets.filter((x) => x.quietRate < QUIET_RATE * typical).sort((x, y) => x.rate - y.rate)) {
    if (share >= quietShare) break;
    const m = mass(b) / total;
    if (share + m <= FLOOR_SHARE && b.rate < FLOOR_RATE * typical) {
      floorShare += m;
      b.root = QUIET_ROOT;
    } else quiet.push(b);
    share += m;
  }
  if (quiet.length > 0 || floorShare > 0) {
    for (const b of buckets) if (b.rate >= BUSY_RATE * typical) b.root = BUSY_ROOT;
  }
  if (share <= slowShare) {
    for (const b of quiet) b.root = QUIET_ROOT;
    return share;
  }
  // The slow share of roots min(1, c × rate) only falls as c grows: bisection.
  const target = slowShare - floorShare;
  const rootOf = (b: PaceBucket, c: number) => Math.max(QUIET_ROOT, Math.min(1, c * b.rate));
  const slowAt = (c: number) => quiet.reduce((sum, b) => sum + (mass(b) / total) * (1 - rootOf(b, c)), 0);
  let low = 0;
  let high = 1;
  while (slowAt(high) > target && high < 1e12) high *= 2;
  for (let i = 0; i < 60; i++) {
    const mid = (low + high) / 2;
    if (slowAt(mid) > target) low = mid;
    else high = mid;
  }
  for (const b of quiet) b.root = rootOf(b, high);
  return slowShare;
}

/**
 * The scale s (ms) at which polls at interval min(maxMs, s / root) over every (weight hours, root) spend
 * `polls`: bisection, as the polls spent only fall as s grows.
 */
function solveScale(roots: { weight: number; root: number }[], polls: number, maxMs: number): number {
  // With the roots in falling order, the first j are paced by the scale, the rest by maxMs:
  // polls = HOUR × (sum of weight × root over the first j / scale + sum of weight over the rest / maxMs).
  const sorted = [...roots].sort((a, b) => b.root - a.root);
  let paced = 0;
  let capped = sorted.reduce((sum, r) => sum + r.weight, 0);
  for (let j = 0; j < sorted.length; j++) {
    paced += sorted[j]!.weight * sorted[j]!.root;
    capped -= sorted[j]!.weight;
    const scaleMs = paced / (polls / HOUR_MS - capped / maxMs);
    const next = sorted[j + 1];
    // Consistent when the j-th is paced (its interval under maxMs) and the next is not.
    if (scaleMs > 0 && scaleMs / sorted[j]!.root <= maxMs && (!next || scaleMs / next.root >= maxMs)) {
      return scaleMs;
    }
  }
  // Every root capped: polls at maxMs everywhere spend less than allowed (the planner handles this before).
  return maxMs * (sorted[0]?.root ?? 1);
}
