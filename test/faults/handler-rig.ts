// What issue 9's handler-fault scenarios stand on, over the fault rig: a faulty task served next to the
// healthy workload (`digest`), steady healthy work arriving while the fault plays out, the daemon under a
// supervisor, and the figures: the tally, the 429s the service answered, how long the healthy work was
// held up, and whether the daemon stayed up.
import type { EmulatedExecution, EmulatorLimits } from '../../src/emulator/index.ts';
import type { JsonObject } from '../../src/api/types.ts';
import type { FaultyTask } from './handler-sources.ts';
import { figuresOf, withRig, type FaultRig, type ScenarioFigures, type Tally } from './rig.ts';
import { Supervisor } from './supervisor.ts';

/** DF_HANDLER_ISOLATION (issue 9). Unknown DF_* settings are ignored by a daemon that predates it. */
export type IsolationMode = 'thread' | 'process' | 'none';

export interface HandlerFaultOptions {
  /** DF_HANDLER_ISOLATION of the daemon; undefined leaves it unset, so the daemon's default applies. */
  isolation?: IsolationMode;
}

/**
 * The poll interval of the rig's daemons: how often each task is polled while it has no work (its idle
 * pace; a poll that found work is followed by another at once). The daemon paces idle polls so as to spend
 * the month's budget evenly; the rig sets DF_BUDGET_PER_MONTH so that this pace is POLL_INTERVAL_MS per task
 * (see perMonthForIdleInterval). "Held up longer than one poll interval" is measured against it.
 */
export const POLL_INTERVAL_MS = 500;
/** Steady healthy work: one `digest` execution every this many ms while a fault plays out. */
export const STEADY_EVERY_MS = 250;
/** How long each healthy execution's handler works. */
export const HEALTHY_WORK_MS = 50;
/** Healthy work flows this long before the fault is injected. */
export const WARMUP_MS = 1_000;
/** The rig's DF_SHUTDOWN_GRACE_MS, and the window the daemon then gives reports to flush (max(5 s, grace/2)). */
const RIG_GRACE_MS = 5_000;
export const FLUSH_BOUND_MS = 5_000;

/**
 * DF_BUDGET_PER_MONTH that makes the daemon's idle pace poll each of `tasks` tasks every `intervalMs`. The
 * daemon spreads what is left of the UTC month (less the report reserve, a 0.5% margin and the work it
 * forecasts) over the time left, each task polled at least every DF_MAX_POLL_INTERVAL_MS. A month that ends
 * while a scenario runs resets the pace (the interval then grows): a scenario straddling midnight UTC on
 * the 1st is not representative.
 */
export function perMonthForIdleInterval(intervalMs: number, tasks: number, nowMs = Date.now()): number {
  const now = new Date(nowMs);
  const monthEndsAt = Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1);
  const paceMs = intervalMs / tasks;
  // The work of a scenario (seconds) is too short to be projected over the month. The slack covers what the
  // month already used (leases of 20 per start), the report reserve and the forecast margin.
  return Math.ceil(((monthEndsAt - nowMs) / paceMs) * 1.02) + 2_000;
}

/** A span of healthy work: the executions created in it, and when its observation ended. */
export interface HealthySpan {
  ids: string[];
  /** Wall-clock ms; an execution of the span still unclaimed then counts as claimed at this instant. */
  until: number;
}

/**
 * How long the healthy task's pending work waited beyond normal, in ms.
 *
 * The service hands out a task's executions oldest first, so healthy execution i can be claimed no earlier
 * than it is due: due_i = max(createdAt_i, claimedAt_{i-1}). A daemon that nothing holds up claims it within
 * `normalPickupMs` of that: one poll interval (an idle poll of the task may have been sent just before it
 * arrived) plus the service latency of the polls that may go first (polls are sent one at a time). So
 *
 *   heldUpMs = max over the span's executions of (claimedAt_i − due_i − normalPickupMs), and at least 0,
 *
 * where an execution not claimed by the span's `until` counts as claimed then, whenever (and whether) it was
 * claimed later. Instants are the emulator's records (createdAt, claimedAt), in ms.
 */
export function heldUpMs(
  executions: readonly Pick<EmulatedExecution, 'id' | 'createdAt' | 'claimedAt'>[],
  span: HealthySpan,
  normalPickupMs: number,
): number {
  const wanted = new Set(span.ids);
  const ordered = executions
    .filter((e) => wanted.has(e.id))
    .sort((a, b) => sequenceOf(a.id) - sequenceOf(b.id));
  let previousClaim = -Infinity;
  let worst = 0;
  for (const execution of ordered) {
    const created = Date.parse(execution.createdAt);
    // Claimed after the span's observation ended (by the next daemon a scenario starts, say): what it waited
    // past `until` is that daemon's start, not this one's pickup.
    const claimed =
      execution.claimedAt === undefined ? span.until : Math.min(Date.parse(execution.claimedAt), span.until);
    worst = Math.max(worst, claimed - Math.max(created, previousClaim) - normalPickupMs);
    previousClaim = claimed;
  }
  return Math.round(worst);
}

/** `execution-12` → 12: the emulator numbers executions in creation order. */
function sequenceOf(id: string): number {
  return Number(/(\d+)$/.exec(id)?.[1] ?? 0);
}

export interface Liveness {
  /** Exits nobody asked for (a crash, running out of memory, process.exit in a handler). */
  unexpectedExits: number;
  /** Restarts the scenario made as a supervisor after those exits. */
  restarts: number;
  /** The supervisor ran out of restarts: the daemon stayed down. */
  gaveUp: boolean;
  /** Once the fault had played out, a daemon was running and answered GET /healthz within 1 s (any status). */
  responsive: boolean;
}

/** The figures of one of issue 9's rows. */
export interface HandlerFaultFigures extends ScenarioFigures {
  /** Answers 429 the service gave, over the whole scenario. */
  rateLimited: number;
  /** See heldUpMs(). */
  heldUpMs: number;
  liveness: Liveness;
}

export interface HandlerFaultResult {
  figures: HandlerFaultFigures;
  tally: Tally;
}

/** What became of one execution: its reports as the service received them, and its handler's runs. */
export interface ExecutionFate {
  id: string;
  /** The service handed it out. */
  claimed: boolean;
  reports: { at: number; status: string; error?: string }[];
  runs: number;
}

export interface HandlerRigSetup extends HandlerFaultOptions {
  /** The faulty tasks served next to the workload (their handlers log runs to the rig's run log). */
  faulty: (rig: FaultRig) => FaultyTask[];
  /** DF_* settings over the rig's. */
  env?: Record<string, string>;
  /** The emulator's limits; default the rig's. */
  limits?: Partial<EmulatorLimits>;
  /** Poll idle tasks every POLL_INTERVAL_MS (default true); false keeps the daemon's own month pacing. */
  pacedPolls?: boolean;
  /** Restarts the supervisor makes after unexpected exits. Default 5. */
  maxRestarts?: number;
}

export class HandlerFaultRig {
  readonly rig: FaultRig;
  readonly supervisor: Supervisor;
  readonly #spans: HealthySpan[] = [];
  #steady: { ids: string[]; timer: NodeJS.Timeout } | undefined;

  private constructor(rig: FaultRig, supervisor: Supervisor) {
    this.rig = rig;
    this.supervisor = supervisor;
  }

  static async create(rig: FaultRig, setup: HandlerRigSetup): Promise<HandlerFaultRig> {
    const faulty = setup.faulty(rig);
    for (const task of faulty) await rig.addTask(task, task.source);
    const env: Record<string, string> = {};
    if (setup.isolation !== undefined) env.DF_HANDLER_ISOLATION = setup.isolation;
    if (setup.pacedPolls ?? true) {
      env.DF_BUDGET_PER_MONTH = String(perMonthForIdleInterval(POLL_INTERVAL_MS, faulty.length + 1));
      env.DF_MAX_POLL_INTERVAL_MS = String(POLL_INTERVAL_MS);
    }
    const supervisor = new Supervisor(rig, {
      maxRestarts: setup.maxRestarts ?? 5,
      env: { ...env, ...setup.env },
    });
    return new HandlerFaultRig(rig, supervisor);
  }

  /** Starts the supervised daemon and waits for it to start polling. */
  async start(extraEnv: Record<string, string> = {}): Promise<void> {
    const daemon = this.supervisor.start(extraEnv);
    const started = await this.rig.waitUntil(() => daemon.hasLog('df-worker started'), 15_000);
    if (!started) throw new Error(`the daemon did not start: ${daemon.describeExit()}`);
  }

  /** Queues one healthy execution every `everyMs` (at most `count`) until stopSteadyWork(). */
  startSteadyWork(options: { everyMs?: number; count?: number } = {}): void {
    const ids: string[] = [];
    const enqueue = () => {
      if (options.count !== undefined && ids.length >= options.count) return;
      ids.push(...this.rig.enqueue(1, { delayMs: HEALTHY_WORK_MS }));
    };
    enqueue();
    this.#steady = { ids, timer: setInterval(enqueue, options.everyMs ?? STEADY_EVERY_MS) };
  }

  /** Ends the span of healthy work under way; its observation ends now. */
  stopSteadyWork(): void {
    if (!this.#steady) return;
    clearInterval(this.#steady.timer);
    this.#spans.push({ ids: this.#steady.ids, until: Date.now() });
    this.#steady = undefined;
  }

  /** Healthy executions queued by other means (a backlog), observed until `until`. */
  addHealthySpan(span: HealthySpan): void {
    this.#spans.push(span);
  }

  /** Every healthy execution of the scenario so far. */
  get healthyIds(): string[] {
    return [...this.#spans.flatMap((s) => s.ids), ...(this.#steady?.ids ?? [])];
  }

  enqueueFaulty(taskKey: string, input: JsonObject = {}): string {
    return this.rig.emulator.enqueueExecution(taskKey, input).id;
  }

  claimed(id: string): boolean {
    return this.rig.execution(id)?.claimedAt !== undefined;
  }

  reported(id: string): boolean {
    return this.rig.reportsOf(id).length > 0;
  }

  /** Ids the service handed out that have no report yet. */
  claimedUnreported(): string[] {
    return this.rig.emulator
      .executions()
      .filter((e) => e.claimedAt !== undefined && e.reports.length === 0)
      .map((e) => e.id);
  }

  /** Waits (at most `timeoutMs`) until every execution the service handed out has a report. */
  settle(timeoutMs: number): Promise<boolean> {
    return this.rig.waitUntil(() => this.claimedUnreported().length === 0, timeoutMs);
  }

  /**
   * Ends the scenario's daemon: SIGTERM, then kill -9 once the drain had its grace period and flush window
   * (at once when `responsive` is false: a daemon whose event loop is blocked never runs its signal handler).
   */
  stop(responsive: boolean, graceMs = RIG_GRACE_MS) {
    return this.supervisor.stop(responsive ? graceMs + FLUSH_BOUND_MS + 3_000 : 1_000);
  }

  /**
   * The usual end of a scenario: steady work stops, the daemon's responsiveness is taken, what it claimed gets
   * `settleMs` to be reported (none when it does not answer), and it is stopped. Resolves `responsive`.
   */
  async wrapUp(settleMs = 5_000): Promise<boolean> {
    this.stopSteadyWork();
    const responsive = await this.supervisor.responsive();
    await this.settle(responsive ? settleMs : 0);
    await this.stop(responsive);
    return responsive;
  }

  async fate(id: string): Promise<ExecutionFate> {
    const runs = (await this.rig.runs()).get(id) ?? 0;
    const reports = this.rig.reportsOf(id).map((report) => {
      const error = report.output.error;
      return {
        at: Date.parse(report.at),
        status: report.status,
        ...(typeof error === 'string' ? { error } : {}),
      };
    });
    return { id, claimed: this.claimed(id), reports, runs };
  }

  /** The figures, once the daemon has stopped. `responsive` was taken when the fault had played out. */
  result(options: { responsive: boolean; normalPickupMs?: number }): HandlerFaultResult {
    const tally = this.rig.tally();
    const executions = this.rig.emulator.executions();
    const normalPickupMs = options.normalPickupMs ?? POLL_INTERVAL_MS;
    const spans = this.#steady ? [...this.#spans, { ids: this.#steady.ids, until: Date.now() }] : this.#spans;
    return {
      tally,
      figures: {
        ...figuresOf(tally),
        rateLimited: this.rig.emulator.requests().filter((r) => r.status === 429).length,
        heldUpMs: Math.max(0, ...spans.map((span) => heldUpMs(executions, span, normalPickupMs))),
        liveness: {
          unexpectedExits: this.supervisor.unexpectedExits.length,
          restarts: this.supervisor.restarts,
          gaveUp: this.supervisor.gaveUp,
          responsive: options.responsive,
        },
      },
    };
  }

  /** stdout and stderr of every daemon the scenario started, as written. */
  output(): string {
    return this.supervisor.daemons.map((d) => `${d.cli.stdout()}\n${d.cli.stderr()}`).join('\n');
  }

  /** Log lines of every daemon the scenario started. */
  logs(): Record<string, unknown>[] {
    return this.supervisor.daemons.flatMap((d) => d.logs());
  }
}

/** Runs `scenario` on a fresh rig with a faulty task next to the workload; always tears everything down. */
export function withHandlerFaults<T>(
  setup: HandlerRigSetup,
  scenario: (rig: HandlerFaultRig) => Promise<T>,
): Promise<T> {
  return withRig(setup.limits === undefined ? {} : { limits: setup.limits }, async (rig) => {
    const handlerRig = await HandlerFaultRig.create(rig, setup);
    try {
      return await scenario(handlerRig);
    } finally {
      handlerRig.stopSteadyWork();
      await handlerRig.supervisor.stop(1_000);
    }
  });
}
