// Chained workloads for the month replay: the simulated service runs jobs. Runs start on FIFO pipelines
// (one run at a time per pipeline); a run's built-in steps take their time; a custom step's execution is
// created only when the step before it has ended, so arrivals depend on the poller's own reports.
// The file format (`--jobs FILE.json`) is in the service's own terms (see PipelineRuns).
import { readFile } from 'node:fs/promises';
import { mulberry32 } from '../clock/seeded-random.ts';
import { customTaskKey, type JobDefinition } from '../scheduler/pipeline-model.ts';
import { monthBounds } from './workloads.ts';

/** One run of a job: it is queued on its pipeline at `at` (ms). */
export interface JobRun {
  job: string;
  at: number;
  /** This run's built-in step durations by step position, where they differ from the job's `durationMs`. */
  durationsMs?: Record<number, number>;
}

export interface JobsFile {
  jobs: JobDefinition[];
  runs: JobRun[];
  /** Tasks registered beside those of the jobs (tasks of no job). */
  extraTasks?: string[];
}

/** A custom step's execution becoming pending. */
export interface ChainedArrival {
  id: number;
  task: string;
  at: number;
  job: string;
  /** The run's index in the file's `runs`. */
  run: number;
  /** The step's position in the job's `tasks`. */
  position: number;
  /** Which custom step of its job it is: 0 for the first, 1 for the second... */
  order: number;
}

/** The service side of a chained month: which execution becomes pending when. */
export class PipelineRuns {
  readonly #jobs: Map<string, JobDefinition>;
  readonly #runs: readonly JobRun[];
  /** Run indices queued per pipeline, in order of `at`. */
  readonly #queues = new Map<string, number[]>();
  readonly #arrivals: ChainedArrival[] = [];
  /** Runs as they started (left their pipeline's queue), for a job-executions list to show. */
  readonly #starts: { run: number; job: string; at: number }[] = [];
  #startsShown = 0;

  constructor(file: JobsFile) {
    this.#jobs = new Map(file.jobs.map((j) => [j.key, j]));
    this.#runs = file.runs;
    const order = file.runs.map((_, i) => i).sort((a, b) => file.runs[a]!.at - file.runs[b]!.at);
    for (const index of order) {
      const job = this.#job(file.runs[index]!.job);
      const pipeline = job.pipeline ?? job.key;
      const queue = this.#queues.get(pipeline) ?? [];
      queue.push(index);
      this.#queues.set(pipeline, queue);
    }
  }

  /** Every task key the jobs name. */
  tasks(): string[] {
    const keys = new Set<string>();
    for (const job of this.#jobs.values()) {
      for (const step of job.tasks) {
        const key = customTaskKey(step);
        if (key !== undefined) keys.add(key);
      }
    }
    return [...keys].sort();
  }

  /** The executions that become pending at the month's start, without any report: each pipeline's first. */
  start(): ChainedArrival[] {
    return [...this.#queues.keys()].flatMap((pipeline) => this.#next(pipeline, -Infinity));
  }

  /** Execution `id` was reported at `at`: what becomes pending next on its pipeline, if anything. */
  reported(id: number, at: number): ChainedArrival[] {
    const done = this.#arrivals[id];
    if (!done) return [];
    return this.#after(done.run, done.position + 1, at, done.order + 1);
  }

  /** Runs started at or before `t` and not returned before: what a job-executions list shows as new. */
  startedUntil(t: number): { run: number; job: string; at: number }[] {
    const shown: { run: number; job: string; at: number }[] = [];
    const rest: { run: number; job: string; at: number }[] = [];
    for (const start of this.#starts.slice(this.#startsShown)) (start.at <= t ? shown : rest).push(start);
    this.#starts.splice(this.#startsShown, this.#starts.length - this.#startsShown, ...shown, ...rest);
    this.#startsShown += shown.length;
    return shown;
  }

  arrival(id: number): ChainedArrival | undefined {
    return this.#arrivals[id];
  }

  /** The next run of `pipeline` starting no sooner than `freeAt` (the previous run's end). */
  #next(pipeline: string, freeAt: number): ChainedArrival[] {
    const index = this.#queues.get(pipeline)?.shift();
    if (index === undefined) return [];
    const run = this.#runs[index]!;
    const at = Math.max(freeAt, run.at);
    this.#starts.push({ run: index, job: run.job, at });
    return this.#after(index, 0, at, 0);
  }

  /** From step `position` of run `index`, started at `at`: built-in steps run, up to the next custom one. */
  #after(index: number, position: number, at: number, order: number): ChainedArrival[] {
    const run = this.#runs[index]!;
    const job = this.#job(run.job);
    let t = at;
    for (let p = position; p < job.tasks.length; p++) {
      const step = job.tasks[p]!;
      const task = customTaskKey(step);
      if (task === undefined) {
        t += run.durationsMs?.[p] ?? step.durationMs ?? 0;
        continue;
      }
      const arrival = {
        id: this.#arrivals.length,
        task,
        at: t,
        job: job.key,
        run: index,
        position: p,
        order,
      };
      this.#arrivals.push(arrival);
      return [arrival];
    }
    // The run ended: its pipeline takes the next one.
    return this.#next(job.pipeline ?? job.key, t);
  }

  #job(key: string): JobDefinition {
    const job = this.#jobs.get(key);
    if (!job) throw new Error(`a run names job '${key}', which the file does not define`);
    return job;
  }
}

export interface ChainedWorkloadOptions {
  /** Tasks registered (task-0...); the jobs draw their custom steps from the first `jobTasks` of them. */
  tasks: number;
  jobTasks?: number;
  jobs: number;
  pipelines: number;
  /** Job runs queued an hour, over all pipelines (Poisson). */
  runsPerHour: number;
  month?: string;
}

const HOUR = 3_600_000;
/** A lognormal built-in duration: median 60 s, clamped to 10 s .. 10 min. */
const builtInMs = (random: () => number) => {
  const normal = Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());
  return Math.round(Math.min(600_000, Math.max(10_000, 60_000 * Math.exp(normal))));
};

/**
 * A seeded chained month: `jobs` job definitions of 1-3 custom steps (distinct tasks) with 0-2 built-in
 * steps before, between and after them, on `pipelines` pipelines; runs queued by a Poisson process. Each
 * run draws its own built-in durations around the job's (a factor of 0.5-2), so a pair's delay varies.
 */
export function chainedWorkload(seed: number, o: ChainedWorkloadOptions): JobsFile {
  const random = mulberry32(seed);
  const pick = (n: number) => Math.floor(random() * n);
  const taskKeys = Array.from({ length: o.tasks }, (_, i) => `task-${i}`);
  const pool = taskKeys.slice(0, o.jobTasks ?? o.tasks);
  const jobs: JobDefinition[] = [];
  for (let j = 0; j < o.jobs; j++) {
    const customs = 1 + pick(3);
    const chosen = new Set<string>();
    while (chosen.size < Math.min(customs, pool.length)) chosen.add(pool[pick(pool.length)]!);
    const tasks: JobDefinition['tasks'][number][] = [];
    const builtIns = () => {
      for (let b = pick(3); b > 0; b--) {
        tasks.push({ name: `builtin-${tasks.length}`, type: 'BUILTIN', durationMs: builtInMs(random) });
      }
    };
    for (const key of chosen) {
      builtIns();
      tasks.push({ name: `replay/${key}`, type: 'SUB_WORKFLOW' });
    }
    builtIns();
    jobs.push({ key: `job-${j}`, pipeline: `pipeline-${j % o.pipelines}`, tasks });
  }
  const { startsAt, endsAt } = monthBounds(o.month);
  const runs: JobRun[] = [];
  for (let t = startsAt; ;) {
    t += (-Math.log(1 - random()) * HOUR) / o.runsPerHour;
    if (t >= endsAt) break;
    const job = jobs[pick(jobs.length)]!;
    const durationsMs: Record<number, number> = {};
    job.tasks.forEach((step, p) => {
      if (step.durationMs !== undefined)
        durationsMs[p] = Math.round(step.durationMs * (0.5 + 1.5 * random()));
    });
    runs.push({ job: job.key, at: Math.round(t), durationsMs });
  }
  const inJobs = new Set(jobs.flatMap((j) => j.tasks.flatMap((s) => customTaskKey(s) ?? [])));
  return { jobs, runs, extraTasks: taskKeys.filter((k) => !inJobs.has(k)) };
}

/** The built-in chained workloads of `bench:month --chained NAME`. */
export const CHAINED_WORKLOADS: readonly {
  name: string;
  description: string;
  options: ChainedWorkloadOptions;
}[] = [
  {
    name: 'chained',
    description: '6 tasks, 8 jobs of 1-3 custom steps on 3 pipelines, 2 runs an hour',
    options: { tasks: 6, jobs: 8, pipelines: 3, runsPerHour: 2 },
  },
  {
    name: 'chained-50',
    description: '50 tasks, 36 jobs on 4 pipelines, 2 runs an hour',
    options: { tasks: 50, jobs: 36, pipelines: 4, runsPerHour: 2 },
  },
  {
    name: 'chained-300',
    description: '300 tasks, 36 jobs (most tasks in none) on 4 pipelines, 2 runs an hour',
    options: { tasks: 300, jobs: 36, pipelines: 4, runsPerHour: 2 },
  },
];

/** Reads a jobs file (`{"jobs": [...], "runs": [{"job", "at"}]}`); names what is wrong in it. */
export async function readJobsFile(path: string): Promise<JobsFile> {
  let value: unknown;
  try {
    value = JSON.parse(await readFile(path, 'utf8'));
  } catch {
    throw new Error(`${path}: not JSON`);
  }
  const { jobs, runs } = (value ?? {}) as { jobs?: unknown; runs?: unknown };
  if (!Array.isArray(jobs) || !Array.isArray(runs))
    throw new Error(`${path}: needs "jobs" and "runs" arrays`);
  const parsedJobs = jobs.map((job: unknown, i): JobDefinition => {
    const j = (job ?? {}) as { key?: unknown; pipeline?: unknown; tasks?: unknown };
    if (typeof j.key !== 'string' || !Array.isArray(j.tasks)) {
      throw new Error(`${path}: jobs[${i}] needs a "key" and a "tasks" array`);
    }
    const tasks = j.tasks.map((step: unknown, s) => {
      const t = (step ?? {}) as { name?: unknown; type?: unknown; durationMs?: unknown };
      if (typeof t.name !== 'string' || typeof t.type !== 'string') {
        throw new Error(`${path}: jobs[${i}].tasks[${s}] needs a "name" and a "type"`);
      }
      if (t.type !== 'SUB_WORKFLOW' && (typeof t.durationMs !== 'number' || t.durationMs < 0)) {
        throw new Error(`${path}: jobs[${i}].tasks[${s}] is built in and needs "durationMs" (ms, >= 0)`);
      }
      return {
        name: t.name,
        type: t.type,
        ...(typeof t.durationMs === 'number' ? { durationMs: t.durationMs } : {}),
      };
    });
    return { key: j.key, ...(typeof j.pipeline === 'string' ? { pipeline: j.pipeline } : {}), tasks };
  });
  const keys = new Set(parsedJobs.map((j) => j.key));
  const parsedRuns = runs.map((run: unknown, i): JobRun => {
    const r = (run ?? {}) as { job?: unknown; at?: unknown };
    const at = typeof r.at === 'string' ? Date.parse(r.at) : NaN;
    if (typeof r.job !== 'string' || !keys.has(r.job))
      throw new Error(`${path}: runs[${i}].job names no job`);
    if (!Number.isFinite(at)) throw new Error(`${path}: runs[${i}].at must be an ISO 8601 instant`);
    return { job: r.job, at };
  });
  return { jobs: parsedJobs, runs: parsedRuns };
}
