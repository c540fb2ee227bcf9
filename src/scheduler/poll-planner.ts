// Decides when each task is polled next: earliest-due first (so a busy task cannot starve the others), again
// at once after a poll that found work when more is likely pending, and otherwise at its idle pace, as last
// planned (pace-plan.ts) and re-planned as the month and the profile move on. Synchronous and driven by the
// caller's clock: the daemon's loop and the month replay drive the very same decisions. Every `nowMs` and due
// instant is on the clock's monotonic face, so a wall-clock step neither stalls nor hurries a poll; the wall
// clock (read through the budget) only places an instant in its month and hour of the week.
import type { Budget } from '../budget/budget.ts';
import { backoffDelayMs, type BackoffOptions } from '../clock/backoff.ts';
import { ArrivalProfile, hourOfWeek } from './arrival-profile.ts';
import { planPace, type PacePlan } from './pace-plan.ts';
import { SurgeWatch } from './surge-watch.ts';
import type { SuccessorPacing } from './successor-pacing.ts';

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
  /**
   * Successor pacing, when the job definitions could be read: a task awaited as a job's next step is due at
   * the pacing's instant when that comes before its idle poll. Default: none (polled by its own arrivals).
   */
  successors?: SuccessorPacing;
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
/** The pace is planned again at least this often (the month's usage moves on)... */
const REPLAN_MS = HOUR_MS;
/** ... and this often while the profile learns (an arrival changes the rates the plan was made for). */
const RELEARN_MS = 5 * 60_000;

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
  /** Monotonic instant `#plan` was made (its own `at` is on the wall clock, for its month). */
  #plannedAt = -Infinity;
  /** Served tasks when `#plan` was made. */
  #plannedFor = 0;
  /** Arrivals learnt since the pace was planned. */
  #learnt = 0;
  /** Orders sends and wakes (see PlannedTask.sentSeq). */
  #seq = 0;
  /** Executions claimed since the planner was made: handlers' service calls are forecast per execution. */
  #claims = 0;
  /** The last plan's overload verdict (see OVERLOAD_EXIT_SHARE in month-forecast.ts). */
  #wasOverloaded = false;
  /** Each task's latest arrivals: a quiet hour that turns busy is polled at the common interval. */
  readonly #surges = new SurgeWatch();
  readonly #successors: SuccessorPacing | undefined;

  constructor(options: PollPlannerOptions) {
    this.#budget = options.budget;
    this.#maxPollIntervalMs = options.maxPollIntervalMs ?? 900_000;
    this.#minPollIntervalMs = options.minPollIntervalMs ?? 0;
    this.#errorBackoff = options.errorBackoff;
    this.profile = options.profile ?? new ArrivalProfile();
    this.#successors = options.successors;
  }

  /** A step before the task's was reported (successors.reported): its poll comes forward to the pacing's. */
  awaitSuccessor(taskKey: string): void {
    const at = this.#successors?.nextPollAt(taskKey);
    if (at === undefined) return;
    for (const t of this.#tasks.values()) {
      if (t.key === taskKey && at < t.nextDueAt) {
        t.nextDueAt = at;
        t.idleDue = false;
      }
    }
  }

  /**
   * The served tasks the idle pace is planned for: all of them, except, under successor pacing, those the
   * job definitions show no job runs unannounced (see SuccessorPacing.rareIdleIntervalMs).
   */
  #pacedKeys(): string[] {
    const successors = this.#successors;
    return successors ? this.#keys.filter((k) => successors.rareIdleIntervalMs(k) === undefined) : this.#keys;
  }

  /**
   * Polls the tasks polled rarely (see #pacedKeys) and the successors' polls will spend until `endsAt`: kept
   * out of the idle pace's.
   */
  #rarePolls(nowMs: number, endsAt: number): number {
    const successors = this.#successors;
    if (!successors) return 0;
    let polls = successors.expectedPolls(endsAt - nowMs);
    for (const key of this.#keys) {
      const every = successors.rareIdleIntervalMs(key);
      if (every !== undefined) polls += Math.ceil(Math.max(0, endsAt - nowMs) / every);
    }
    return polls;
  }

  /** Replaces the set of polled tasks; new ones are due at once, known ones keep their state. */
  setTasks(tasks: { id: string; key: string }[], nowMs: number): void {
    const ids = new Set(tasks.map((t) => t.id));
    for (const id of this.#tasks.keys()) if (!ids.has(id)) this.#tasks.delete(id);
    const keys = new Set(tasks.map((t) => t.key));
    this.#surges.keepOnly(keys);
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

  /**
   * A poll found work: `arrivedAt` is the monotonic instant of the execution's createdAt (the service's clock
   * read through a learnt offset, see ServiceClock), or undefined when unknown (what the profile learns from).
   * `jobId`: the execution's `input.context.jobId` (see jobIdOf), which ties it to the awaited run.
   */
  onHit(taskId: string, nowMs: number, arrivedAt?: number, jobId?: string): void {
    const known = arrivedAt !== undefined && Number.isFinite(arrivedAt);
    const t = this.#polled(taskId, nowMs, known ? arrivedAt : nowMs);
    if (!t) return;
    this.#claims++;
    if (known) {
      this.profile.arrival(t.key, this.#wall(Math.min(arrivedAt, nowMs)), this.#wall(nowMs));
      this.profile.pickups.add(this.#budget.month(nowMs).startsAt, nowMs - arrivedAt);
      this.#surges.arrival(t.key, arrivedAt);
      this.#successors?.arrived(t.key, arrivedAt, jobId);
      this.#learnt++;
    }
    t.errorStreak = 0;
    // More work may be pending (several may have arrived since the last poll): go again at once, unless the
    // work is more than the month can carry, or the execution arrived so shortly before the poll that another
    // one most likely did not (see repollThresholdMs in slow-share.ts), or the task's work is not yet
    // forecast (see PacePlan.forecast) and has run ahead of the month's even spend.
    const plan = this.#planAt(nowMs);
    const waitedMs = arrivedAt !== undefined && Number.isFinite(arrivedAt) ? nowMs - arrivedAt : Infinity;
    const unlikely = waitedMs < (plan.repollAfterMs.get(t.key)?.[hourOfWeek(this.#wall(nowMs))] ?? 0);
    const ahead = !plan.forecast.has(t.key) && this.#budget.aheadOfPace(nowMs);
    // An overload read from fewer than RATE_GROUPS arrivals is a guess (a cold start's first minutes read so
    // from doubt alone): it does not hold back a backlog in hand, while `ahead` still guards the month.
    const overloaded = plan.overloaded && !plan.doubtful;
    t.idleDue = unlikely || ahead || overloaded;
    t.nextDueAt = t.idleDue ? this.#idleDueAt(t, nowMs) : nowMs + this.#minPollIntervalMs;
    if (overloaded && arrivedAt !== undefined && Number.isFinite(arrivedAt)) {
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
    const idle = this.#capToMonth(nowMs, nowMs + this.#intervalOf(this.#planAt(nowMs), t.key, nowMs));
    return Math.min(idle, this.#successors?.nextPollAt(t.key) ?? Infinity);
  }

  #capToMonth(nowMs: number, dueAt: number): number {
    const endsAt = nowMs + (this.#budget.month(nowMs).endsAt - this.#wall(nowMs));
    return Math.ceil(Math.min(dueAt, Math.max(nowMs, endsAt)));
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
      this.profile.observe([t.key], this.#wall(nowMs), this.#wall(seenThroughMs));
      this.#successors?.polled(t.key);
    }
    return t;
  }

  #intervalOf(plan: PacePlan, key: string, nowMs: number): number {
    const rare = this.#successors?.rareIdleIntervalMs(key);
    if (rare !== undefined) return rare;
    if (!Number.isFinite(plan.scaleMs) || plan.deferred.has(key)) return plan.longestMs;
    const hour = hourOfWeek(this.#wall(nowMs));
    let weight = plan.weights.get(key)?.[hour] ?? 1;
    // A quiet hour turned busy is polled at the common interval; only where the work is forecast (see
    // PacePlan.forecast): a backlog drained in a cold start's first hours is no surge.
    const surging = () => this.#surges.surging(key, plan.rates.get(key)?.[hour] ?? 0, nowMs);
    if (weight < 1 && plan.forecast.has(key) && surging()) weight = 1;
    const minimumMs = this.#budget.minimumIntervalMs * plan.taskCount;
    return Math.min(plan.longestMs, Math.max(minimumMs, plan.scaleMs / weight));
  }

  #planAt(nowMs: number): PacePlan {
    const plan = this.#plan;
    const plannedAt = this.#plannedAt;
    if (
      plan &&
      nowMs >= plannedAt &&
      nowMs - plannedAt <
        (this.#learnt > 0 ? (plan.learning ? 0 : RELEARN_MS) : plan.doubtful ? RELEARN_MS : REPLAN_MS) &&
      this.#plannedFor === this.#tasks.size
    ) {
      return plan;
    }
    this.#learnt = 0;
    this.#plan = this.#planPace(nowMs);
    this.#plannedAt = nowMs;
    this.#plannedFor = this.#tasks.size;
    return this.#plan;
  }

  /** The wall-clock instant at monotonic `nowMs`: what names its month and hour of the week. */
  #wall(nowMs: number): number {
    return this.#budget.wallAt(nowMs);
  }

  /** Plans the idle pace anew (see planPace), keeping its overload verdict for the next plan. */
  #planPace(nowMs: number): PacePlan {
    const wallMs = this.#wall(nowMs);
    const month = this.#budget.month(nowMs);
    const plan = planPace({
      nowMs: wallMs,
      keys: this.#pacedKeys(),
      profile: this.profile,
      month,
      reportReserve: this.#budget.reportReserve + this.#rarePolls(wallMs, month.endsAt),
      minimumIntervalMs: this.#budget.minimumIntervalMs,
      maxPollIntervalMs: this.#maxPollIntervalMs,
      claims: this.#claims,
      handlerCalls: this.#budget.sent('handler'),
      wasOverloaded: this.#wasOverloaded,
    });
    this.#wasOverloaded = plan.overloaded;
    return plan;
  }
}
