// Decides when each task is polled next: earliest-due first (so a busy task cannot starve the others),
// soon again after a poll that found work, backing off towards the month's pace after empty polls.
// Pure and synchronous: the daemon's loop and the month simulation drive the very same decisions.
import type { Budget } from '../budget/budget.ts';
import { backoffDelayMs, type BackoffOptions } from '../clock/backoff.ts';

/** Back-off polls after a busy task's first empty poll (1, 2, 4, 8 s by default) before the idle pace. */
const MAX_BACKOFF_POLLS = 4;

export interface PollPlannerOptions {
  budget: Budget;
  /** Every task is polled at least this often while the month's budget allows it. Default 15 min. */
  maxPollIntervalMs?: number;
  /** Delay before polling a task again after it handed out work. Default 0. */
  minPollIntervalMs?: number;
  /** First step of the back-off from a busy task to its idle pace. Default 1 s. */
  firstEmptyBackoffMs?: number;
  /** Back-off after failed polls (5xx, network): base and cap, in ms. */
  errorBackoff: BackoffOptions;
}

export interface PlannedTask {
  taskId: string;
  key: string;
  nextDueAt: number;
  lastPolledAt: number;
  /** Empty polls since the last hit; drives the back-off towards the idle pace. */
  emptyStreak: number;
  errorStreak: number;
  /** Polls in a row that found work. */
  hitStreak: number;
  /** True from a second hit in a row (a backlog) until the back-off has reached the idle pace again. */
  busy: boolean;
  /** True when the next poll comes from the idle pace, not from work (a re-poll, a back-off, a nudge). */
  idleDue: boolean;
  /** Order of the last poll sent and of the last wake: a wake after the poll was sent is still owed. */
  sentSeq: number;
  wokenSeq: number;
}

export class PollPlanner {
  readonly #budget: Budget;
  readonly #maxPollIntervalMs: number;
  readonly #minPollIntervalMs: number;
  readonly #firstEmptyBackoffMs: number;
  readonly #errorBackoff: BackoffOptions;
  readonly #tasks = new Map<string, PlannedTask>();
  readonly #work: WorkRate;
  /** Orders sends and wakes (see PlannedTask.sentSeq). */
  #seq = 0;

  constructor(options: PollPlannerOptions) {
    this.#budget = options.budget;
    this.#maxPollIntervalMs = options.maxPollIntervalMs ?? 900_000;
    this.#minPollIntervalMs = options.minPollIntervalMs ?? 0;
    this.#firstEmptyBackoffMs = options.firstEmptyBackoffMs ?? 1_000;
    this.#errorBackoff = options.errorBackoff;
    this.#work = new WorkRate(this.#budget);
  }

  /** Replaces the set of polled tasks; new ones are due at once, known ones keep their state. */
  setTasks(tasks: { id: string; key: string }[], nowMs: number): void {
    const ids = new Set(tasks.map((t) => t.id));
    for (const id of this.#tasks.keys()) if (!ids.has(id)) this.#tasks.delete(id);
    for (const t of tasks) {
      if (!this.#tasks.has(t.id)) {
        this.#tasks.set(t.id, {
          taskId: t.id,
          key: t.key,
          nextDueAt: nowMs,
          lastPolledAt: -Infinity,
          emptyStreak: 0,
          errorStreak: 0,
          hitStreak: 0,
          busy: false,
          idleDue: true,
          sentSeq: 0,
          wokenSeq: 0,
        });
      }
    }
  }

  get tasks(): readonly PlannedTask[] {
    return [...this.#tasks.values()];
  }

  /** The task to poll next and when: earliest due, then the one polled least recently. */
  next(): PlannedTask | undefined {
    let best: PlannedTask | undefined;
    for (const t of this.#tasks.values()) {
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
   * How long one task waits between idle polls so that all of them together keep to the month's pace, with
   * what the work of the last day (claims, reports, re-polls) will go on spending set aside first.
   */
  idleIntervalMs(nowMs: number): number {
    return this.#budget.idlePaceMs(nowMs, this.#work.projected(nowMs)) * Math.max(1, this.#tasks.size);
  }

  /** True when the month's pace forbids polling every task within the configured maximum interval. */
  paceExceedsMaxInterval(nowMs: number): boolean {
    return this.idleIntervalMs(nowMs) > this.#maxPollIntervalMs;
  }

  onHit(taskId: string, nowMs: number): void {
    const t = this.#polled(taskId, nowMs);
    if (!t) return;
    t.emptyStreak = 0;
    t.errorStreak = 0;
    t.hitStreak++;
    // One hit alone may be a trickle (one item now and then): the re-poll below finds out. Two in a row
    // are a backlog, after which more work is likely soon: worth the back-off polls of onEmpty.
    if (t.hitStreak >= 2) t.busy = true;
    // A backlog is likely: go again at once, unless work has already run ahead of the month's even spend.
    t.idleDue = this.#budget.aheadOfPace(nowMs);
    t.nextDueAt = t.idleDue ? this.#idleDueAt(nowMs) : nowMs + this.#minPollIntervalMs;
    this.#honourWake(t, nowMs);
  }

  onEmpty(taskId: string, nowMs: number): void {
    const t = this.#polled(taskId, nowMs);
    if (!t) return;
    this.#planAfterEmpty(t, nowMs);
    this.#honourWake(t, nowMs);
  }

  #planAfterEmpty(t: PlannedTask, nowMs: number): void {
    if (t.idleDue) this.#work.idlePoll(nowMs);
    t.errorStreak = 0;
    t.hitStreak = 0;
    t.emptyStreak++;
    const idle = this.idleIntervalMs(nowMs);
    if (t.busy) {
      const step = this.#firstEmptyBackoffMs * 2 ** (t.emptyStreak - 1);
      // Back-off polls are a bet that more work is coming soon after a burst. A few of them only (work that
      // comes later is found by the idle pace), and only while the month is not spent ahead of its pace and
      // half the minute's budget is free: otherwise a steady trickle of work, each item followed by its own
      // back-off polls, would spend the month early and leave later work waiting for hours.
      if (
        t.emptyStreak <= MAX_BACKOFF_POLLS &&
        step < idle &&
        !this.#budget.aheadOfPace(nowMs) &&
        this.#budget.minuteHeadroom(nowMs) >= 0.5
      ) {
        t.nextDueAt = nowMs + step;
        t.idleDue = false;
        return;
      }
      t.busy = false;
    }
    t.nextDueAt = this.#idleDueAt(nowMs, idle);
    t.idleDue = true;
  }

  /**
   * When a task idle from `nowMs` is due: one idle interval later, but no later than the month's end. Near
   * the end of a spent month the interval can span days; a new month brings a new budget and a new pace.
   */
  #idleDueAt(nowMs: number, idle = this.idleIntervalMs(nowMs)): number {
    return Math.min(nowMs + idle, Math.max(nowMs, this.#budget.month(nowMs).endsAt));
  }

  /** After a 5xx or network error: the exponential back-off with jitter of every retry, capped. */
  onError(taskId: string, nowMs: number): void {
    const t = this.#polled(taskId, nowMs);
    if (!t) return;
    // A failed poll is no work found: it must not make the work look busier than it is.
    this.#work.idlePoll(nowMs);
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

  #polled(taskId: string, nowMs: number): PlannedTask | undefined {
    const t = this.#tasks.get(taskId);
    if (t) t.lastPolledAt = nowMs;
    return t;
  }
}

const HOUR_MS = 3_600_000;
/** How far back the work rate is measured. */
const WORK_WINDOW_MS = 24 * HOUR_MS;
/** Idle polling keeps at least this share of what is left of the month, however busy the work. */
const MIN_IDLE_SHARE = 0.2;

/**
 * What work (every request but idle polls that found nothing) spent over the last day, projected to the
 * month's end. Without it, idle polling would be paced as if it had the month to itself: a steady trickle
 * of work then spends the month early, and work arriving in its last days waits for hours.
 */
class WorkRate {
  readonly #budget: Budget;
  #idlePolls = 0;
  /** Hourly samples of the month's usage and of the idle polls so far, oldest first. */
  #samples: { at: number; used: number; idlePolls: number }[] = [];

  constructor(budget: Budget) {
    this.#budget = budget;
  }

  idlePoll(nowMs: number): void {
    this.#sample(nowMs);
    this.#idlePolls++;
  }

  /** Requests the work of the last day will spend from now to the month's end, at its rate. */
  projected(nowMs: number): number {
    const { used, remaining, endsAt } = this.#sample(nowMs);
    const oldest = this.#samples[0]!;
    const elapsedMs = nowMs - oldest.at;
    // Less than an hour of history says little about a rate: idle polling keeps the whole month meanwhile.
    if (elapsedMs < HOUR_MS) return 0;
    const work = Math.max(0, used - oldest.used - (this.#idlePolls - oldest.idlePolls));
    return Math.min((work / elapsedMs) * Math.max(0, endsAt - nowMs), remaining * (1 - MIN_IDLE_SHARE));
  }

  #sample(nowMs: number): { used: number; remaining: number; endsAt: number } {
    const month = this.#budget.month(nowMs);
    const last = this.#samples.at(-1);
    // A new month (its usage restarts) or a clock stepped back: the old samples no longer compare.
    if (last && (month.used < last.used || nowMs < last.at)) this.#samples = [];
    if (this.#samples.length === 0 || nowMs - this.#samples.at(-1)!.at >= HOUR_MS) {
      this.#samples.push({ at: nowMs, used: month.used, idlePolls: this.#idlePolls });
      while (this.#samples.length > 1 && nowMs - this.#samples[0]!.at > WORK_WINDOW_MS) this.#samples.shift();
    }
    return { used: month.used, remaining: month.remaining, endsAt: month.endsAt };
  }
}
