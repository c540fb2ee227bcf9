// Successor pacing: when a step of a job run is reported and the job's next custom step is a task df-worker
// serves, that task's polls are placed around the learned delay from such a report to the step's arrival
// (per pair of steps), and stop once it arrived or the window passed. Pure and clock-driven: the planner
// asks `nextPollAt`, the budget gate still decides whether a poll is sent, and the month replay drives it.
import type { Clock } from '../clock/clock.ts';
import { pairKey, type IdleRole, type PipelineModel, type Successor } from './pipeline-model.ts';

export interface SuccessorPacingOptions {
  /** Polls after a report before a pair has any history, as delays from the report (ms). */
  burstMs?: readonly number[];
  /** Polls spent on one awaited step once its pair has history (placed at the delays' quantiles). Default 24. */
  pollsPerStep?: number;
  /** Delays kept per pair (the newest). Default 50. */
  historySize?: number;
  /** Delays a pair needs before they replace the burst. Default 3. */
  minHistory?: number;
  /**
   * Idle interval of a task only our own reports announce (IdleRole `after-report`): the last resort for a
   * step that came after its window. Default 6 h.
   */
  afterReportIdleMs?: number;
  /** Idle interval of a task in no job (IdleRole `no-job`) until the jobs are read again. Default 24 h. */
  noJobIdleMs?: number;
}

const HOUR_MS = 3_600_000;

/**
 * The default burst: dense first (a step straight after ours is created at once), then spread out to an
 * hour (built-in steps take 10 s to 10 min each): 14 polls.
 */
export const DEFAULT_BURST_MS: readonly number[] = [
  1_000, 3_000, 8_000, 20_000, 45_000, 90_000, 180_000, 360_000, 600_000, 900_000, 1_350_000, 1_800_000,
  2_700_000, 3_600_000,
];

interface Wait {
  pair: string;
  /** The job run awaited (the execution's `context.jobId`), when known. */
  run?: string;
  reportedAt: number;
  /** Instants still to poll at, ascending. */
  pollAt: number[];
}

/** The learned delays, as kept in the state folder beside the arrival profile. */
export interface SuccessorDelays {
  version: 1;
  delaysMs: Record<string, number[]>;
}

/**
 * The job an execution belongs to (`input.context.jobId`), when the service said: it names the run, since a
 * job's runs go one at a time on its pipeline (FIFO).
 */
export function jobIdOf(execution: { input?: unknown }): string | undefined {
  const context = (execution.input as { context?: unknown } | undefined)?.context;
  const jobId = (context as { jobId?: unknown } | null | undefined)?.jobId;
  return typeof jobId === 'string' ? jobId : undefined;
}

export class SuccessorPacing {
  readonly #clock: Clock;
  readonly #burstMs: readonly number[];
  readonly #pollsPerStep: number;
  readonly #historySize: number;
  readonly #minHistory: number;
  readonly #rareIdleMs: Record<Exclude<IdleRole, 'arrivals'>, number>;
  #model: PipelineModel | undefined;
  /** How often the job-executions list is read while it stands in for idle polls; undefined when it does not. */
  #listEveryMs: number | undefined;
  /** Polls sent at a pacing instant, and when the first step was awaited: what the idle pace leaves them. */
  #pacedPolls = 0;
  #firstReportAt: number | undefined;
  readonly #delays = new Map<string, number[]>();
  /** Awaited steps by task key, oldest report first (the service hands out the oldest execution first). */
  readonly #waits = new Map<string, Wait[]>();

  constructor(clock: Clock, options: SuccessorPacingOptions = {}) {
    this.#clock = clock;
    this.#burstMs = options.burstMs ?? DEFAULT_BURST_MS;
    this.#pollsPerStep = Math.max(1, options.pollsPerStep ?? 24);
    this.#historySize = Math.max(1, options.historySize ?? 50);
    this.#minHistory = Math.max(1, options.minHistory ?? 3);
    this.#rareIdleMs = {
      'after-report': options.afterReportIdleMs ?? 6 * HOUR_MS,
      'no-job': options.noJobIdleMs ?? 24 * HOUR_MS,
    };
  }

  /** The job definitions as last read; undefined when they could not be (every task idle-polled as today). */
  useModel(model: PipelineModel | undefined): void {
    this.#model = model;
  }

  /**
   * The job-executions list is read every `everyMs` and shows each run as it starts (see JobRunWatch): the
   * steps a start announces are then awaited like a successor, instead of idle-polled. Undefined: it is not
   * (not readable, or failing), and those steps are idle-polled as today.
   */
  useJobList(everyMs: number | undefined): void {
    this.#listEveryMs = everyMs;
  }

  /** Whether the job-executions list stands in for idle polls now. */
  get listing(): boolean {
    return this.#listEveryMs !== undefined;
  }

  /**
   * The idle interval the pipeline sets for `task` (ms), or undefined when it is polled at the idle pace as
   * today: a task that belongs to no running job's future is not worth an idle poll, nor one whose runs the
   * job-executions list shows starting.
   */
  rareIdleIntervalMs(task: string): number | undefined {
    const role = this.#model?.idleRole(task) ?? 'arrivals';
    if (role === 'arrivals') return this.listing ? this.#rareIdleMs['after-report'] : undefined;
    return this.#rareIdleMs[role];
  }

  /**
   * The step before `successor` was reported (or, for a pair from a run's start, the run started) at `at`
   * (monotonic ms, default now, never later): its arrival is awaited. A pair and run already awaited is
   * not awaited twice.
   */
  reported(successor: Successor, run?: string, at?: number): void {
    const now = Math.min(at ?? Infinity, this.#clock.monotonic());
    const pair = pairKey(successor);
    const list = this.#waits.get(successor.task) ?? [];
    if (run !== undefined && list.some((w) => w.pair === pair && w.run === run)) return;
    this.#firstReportAt ??= now;
    const offsets = this.#offsets(pair);
    const wait: Wait = { pair, reportedAt: now, pollAt: offsets.map((d) => now + d) };
    if (run !== undefined) wait.run = run;
    list.push(wait);
    this.#waits.set(successor.task, list);
  }

  /**
   * A poll of `task` claimed an execution created at `createdAt` (the service's own instant): the awaited step
   * of job run `run` arrived (without `run`, or when no wait names a run, the oldest). Its delay is learned
   * and its polls end. False when none was awaited: an execution of another job's first step, say, which
   * must neither end the wait nor teach its pair a delay.
   */
  arrived(task: string, createdAt: number, run?: string): boolean {
    const list = this.#waits.get(task);
    if (!list) return false;
    let index = run === undefined ? 0 : list.findIndex((w) => w.run === run);
    if (index < 0) index = list.findIndex((w) => w.run === undefined);
    if (index < 0) return false;
    const [wait] = list.splice(index, 1) as [Wait];
    if (list.length === 0) this.#waits.delete(task);
    const delays = this.#delays.get(wait.pair) ?? [];
    delays.push(Math.max(0, createdAt - wait.reportedAt));
    if (delays.length > this.#historySize) delays.splice(0, delays.length - this.#historySize);
    this.#delays.set(wait.pair, delays);
    return true;
  }

  /** The next instant a poll of `task` is due for an awaited step, or undefined when none is awaited. */
  nextPollAt(task: string): number | undefined {
    let next: number | undefined;
    for (const wait of this.#waits.get(task) ?? []) {
      const at = wait.pollAt[0];
      if (at !== undefined && (next === undefined || at < next)) next = at;
    }
    return next;
  }

  /** Tasks with an awaited step, for the planner's sweep. */
  awaitedTasks(): string[] {
    return [...this.#waits.keys()];
  }

  /** A poll of `task` was sent now (found nothing, or what it found was passed to `arrived`). */
  polled(task: string): void {
    const list = this.#waits.get(task);
    if (!list) return;
    const now = this.#clock.monotonic();
    if (list.some((w) => w.pollAt[0] !== undefined && w.pollAt[0] <= now)) this.#pacedPolls++;
    for (const wait of list) while (wait.pollAt.length > 0 && wait.pollAt[0]! <= now) wait.pollAt.shift();
    // A wait whose polls are spent has passed its window: the step is given up to the idle polls.
    const open = list.filter((w) => w.pollAt.length > 0);
    if (open.length === 0) this.#waits.delete(task);
    else this.#waits.set(task, open);
  }

  /**
   * Requests the pacing is expected to bring about in the next `forMs`: its polls at the rate it did since
   * its first report, and the job-executions lists at their cadence (each at least one page). The idle pace
   * keeps them out of its spend, or the month's last hours would find it spent.
   */
  expectedPolls(forMs: number): number {
    const lists = this.#listEveryMs === undefined ? 0 : Math.max(0, forMs) / this.#listEveryMs;
    const since = this.#firstReportAt;
    if (since === undefined || this.#pacedPolls === 0) return lists;
    const elapsed = Math.max(HOUR_MS, this.#clock.monotonic() - since);
    return lists + (this.#pacedPolls / elapsed) * Math.max(0, forMs);
  }

  /** Learned delays of a pair of steps (ms, oldest first). */
  delaysOf(successor: Pick<Successor, 'job' | 'from' | 'to'>): readonly number[] {
    return this.#delays.get(pairKey(successor)) ?? [];
  }

  snapshot(): SuccessorDelays {
    return { version: 1, delaysMs: Object.fromEntries(this.#delays) };
  }

  /**
   * Takes back what `snapshot` saved, pair by pair, ignoring a pair whose delays are not a list of durations;
   * false (and nothing taken) when `saved` is not of its shape at all.
   */
  restore(saved: unknown): boolean {
    const { version, delaysMs } = (saved ?? {}) as Partial<SuccessorDelays>;
    if (version !== 1 || typeof delaysMs !== 'object' || delaysMs === null || Array.isArray(delaysMs))
      return false;
    for (const [pair, list] of Object.entries(delaysMs)) {
      if (Array.isArray(list) && list.every((d) => typeof d === 'number' && Number.isFinite(d) && d >= 0)) {
        this.#delays.set(pair, list.slice(-this.#historySize));
      }
    }
    return true;
  }

  /** Delays from the report to poll at: the burst, or the learned delays' quantiles and one tail poll. */
  #offsets(pair: string): number[] {
    const history = this.#delays.get(pair) ?? [];
    if (history.length < this.#minHistory) return [...this.#burstMs];
    const sorted = [...history].sort((a, b) => a - b);
    const n = this.#pollsPerStep;
    const offsets = new Set<number>();
    // A poll at each 1/(n-1) quantile, the first at the shortest delay seen: the wait after an arrival is
    // at most one gap, and each gap holds an equal share of the pair's arrivals.
    for (let k = 0; k < n - 1; k++) {
      const index = Math.min(sorted.length - 1, Math.ceil((k / Math.max(1, n - 2)) * (sorted.length - 1)));
      offsets.add(Math.round(sorted[index]!) + 500);
    }
    // Polls past the longest seen, for an arrival later than any before.
    offsets.add(Math.round(sorted.at(-1)! * 1.5) + 1_000);
    offsets.add(Math.round(sorted.at(-1)! * 3) + 1_000);
    return [...offsets].sort((a, b) => a - b);
  }
}
