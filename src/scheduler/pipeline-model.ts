// The pipeline as the service describes it: job definitions (a job "defines the sequence of tasks within
// it"; a custom task is a step `{"name": "<account>/<task key>", "type": "SUB_WORKFLOW"}`) read into, for
// each task df-worker serves, the steps that follow it. Successor pacing and the month replay both read it.

/** One step of a job, as the service lists it. Built-in steps carry no key of ours. */
export interface JobStep {
  /** `<account>/<task key>` for a custom step (`SUB_WORKFLOW`); the built-in's name otherwise. */
  name: string;
  /** `SUB_WORKFLOW` for a custom task; anything else is a built-in step. */
  type: string;
  /** How long a built-in step takes (the replay's files only; the service does not say). */
  durationMs?: number;
}

/** A job definition: its key, the pipeline it runs on (FIFO, one run at a time) and its steps in order. */
export interface JobDefinition {
  key: string;
  pipeline?: string;
  tasks: readonly JobStep[];
}

/** The next custom step after a custom step of a job: the pair whose report-to-arrival delay is learned. */
export interface Successor {
  job: string;
  /** Step positions in the job's `tasks` (0-based). */
  from: number;
  to: number;
  /** The task key of the step at `to`. */
  task: string;
  /** Built-in steps between the two (the report is followed by these before `to` is created). */
  builtInsBetween: number;
}

/** The task key of a custom step (`<account>/<key>` → `<key>`), or undefined for a built-in step. */
export function customTaskKey(step: JobStep): string | undefined {
  if (step.type !== 'SUB_WORKFLOW') return undefined;
  const slash = step.name.lastIndexOf('/');
  return slash < 0 ? step.name : step.name.slice(slash + 1);
}

/** A stable name for a pair of steps, the key of its learned delays. */
export const pairKey = (s: Pick<Successor, 'job' | 'from' | 'to'>) => `${s.job}#${s.from}>${s.to}`;

/** How a task's idle polls go, from the job definitions (see PipelineModel.idleRole). */
export type IdleRole =
  /** It can become pending without a report of ours first: polled at the idle pace, as today. */
  | 'arrivals'
  /** Only ever a step after a custom step served here: awaited after that step's report, rarely otherwise. */
  | 'after-report'
  /** A step of no job: nothing can make it pending until the jobs change. */
  | 'no-job';

/** What the job definitions say about the tasks df-worker serves. */
export class PipelineModel {
  readonly #successors = new Map<string, Successor>();
  readonly #byTask = new Map<string, Successor>();
  readonly #inJobs = new Set<string>();
  /** Tasks some job runs without a report of ours before: a first custom step, or one after a step not served here. */
  readonly #unannounced = new Set<string>();
  /** Per job, its served steps no report of ours announces, as steps after the run's start (`from` -1). */
  readonly #afterStart = new Map<string, Successor[]>();
  readonly #served: ReadonlySet<string>;
  readonly #complete: boolean;

  /**
   * `complete`: every job the service listed was read (none was skipped as unusable); only then is a task
   * in none of them known to be in no job.
   */
  constructor(
    jobs: readonly JobDefinition[],
    served: Iterable<string>,
    options: { complete?: boolean } = {},
  ) {
    this.#served = new Set(served);
    this.#complete = options.complete ?? true;
    for (const job of jobs) {
      const custom = job.tasks.flatMap((step, position) => {
        const task = customTaskKey(step);
        return task === undefined ? [] : [{ task, position }];
      });
      custom.forEach(({ task, position }, i) => {
        this.#inJobs.add(task);
        const before = custom[i - 1];
        if (before === undefined || !this.#served.has(before.task)) {
          this.#unannounced.add(task);
          if (this.#served.has(task)) {
            const list = this.#afterStart.get(job.key) ?? [];
            list.push({ job: job.key, from: -1, to: position, task, builtInsBetween: position });
            this.#afterStart.set(job.key, list);
          }
        }
        const next = custom[i + 1];
        if (next === undefined || !this.#served.has(next.task)) return;
        const successor = {
          job: job.key,
          from: position,
          to: next.position,
          task: next.task,
          builtInsBetween: next.position - position - 1,
        };
        this.#successors.set(`${job.key}#${position}`, successor);
        if (!this.#byTask.has(`${job.key}#${task}`)) this.#byTask.set(`${job.key}#${task}`, successor);
      });
    }
  }

  /** The served custom step that follows `task`'s (its first) step in `job`, if any. */
  successorAfter(job: string, task: string): Successor | undefined {
    return this.#byTask.get(`${job}#${task}`);
  }

  /**
   * The served steps of `job` that a run's start announces and no report of ours does (its first custom
   * step, or one after a step served elsewhere), as pairs from the start (`from` -1): what a run seen in
   * progress in the job-executions list may soon hand out.
   */
  stepsAfterStart(job: string): readonly Successor[] {
    return this.#afterStart.get(job) ?? [];
  }

  /** The served custom step that follows step `position` of `job`, if any. */
  successorOf(job: string, position: number): Successor | undefined {
    return this.#successors.get(`${job}#${position}`);
  }

  /**
   * Whether a task can become pending without a report of ours coming first: it is some job's first custom
   * step, follows a custom step not served here, or belongs to no job we know (then nothing is known of it,
   * and today's idle polls stay).
   */
  arrivesUnannounced(task: string): boolean {
    return this.#unannounced.has(task) || !this.#inJobs.has(task);
  }

  /** Whether a task is a step of any job at all (a task of no job's future is not worth an idle poll). */
  inAnyJob(task: string): boolean {
    return this.#inJobs.has(task);
  }

  /**
   * How the task's idle polls go: at the idle pace when it can arrive unannounced, rarely when only our own
   * reports announce it, or when it is in no job of a complete list (the jobs are read again with the tasks).
   */
  idleRole(task: string): IdleRole {
    if (!this.#inJobs.has(task)) return this.#complete ? 'no-job' : 'arrivals';
    return this.#unannounced.has(task) ? 'arrivals' : 'after-report';
  }
}
