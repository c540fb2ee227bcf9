// What the worker in the same process did with each execution, for the console: its attempts (start, duration,
// how each ended) and their log lines, its outcome and its report. Heard from the daemon's events (events.ts)
// and from its log lines (see log-capture.ts); the service knows none of it. Bounded: the oldest executions go.
import type { WorkerEvents } from '../events/worker-events.ts';

export interface LogLine {
  /** ISO 8601, as the log line says. */
  at: string;
  level: string;
  msg: string;
  /** The line's other fields (bindings such as taskKey and executionId left out), as JSON; '' when none. */
  fields: string;
}

export interface AttemptRecord {
  attempt: number;
  startedAt: number;
  durationMs?: number;
  /** How it ended ('returned', 'threw', 'timeout'...); undefined while it runs. */
  result?: string;
  error?: { name: string; message: string };
  lines: LogLine[];
}

export interface WorkerExecution {
  executionId: string;
  task: string;
  claimedAt: number;
  /** Taken up again from the journal rather than freshly claimed. */
  resumed: boolean;
  attempts: AttemptRecord[];
  outcome?: { status: 'COMPLETED' | 'FAILED'; attempts: number; durationMs: number; failure?: string };
  report?: { result: string; attempts: number; at: number };
  /** Lines of the execution outside any attempt: the worker's (claimed, finished, reported), and a handler's
   * timer that fired after its attempt ended. */
  lines: LogLine[];
}

export interface RecorderOptions {
  /** Executions kept, newest; older ones are forgotten. Default 500. */
  maxExecutions?: number;
  /** Log lines kept per attempt; later ones are counted, not kept. Default 200. */
  maxLinesPerAttempt?: number;
  now?: () => number;
}

/** Characters of a line's message and of its fields kept: a handler logging a large object costs this much. */
const MAX_TEXT_CHARS = 2_000;

/** Fields every attempt's lines carry: shown once, as the attempt's heading, not on each line. */
const BINDINGS = new Set([
  'level',
  'time',
  'msg',
  'pid',
  'hostname',
  'name',
  'taskKey',
  'executionId',
  'attempt',
]);

export class ExecutionRecorder {
  readonly #executions = new Map<string, WorkerExecution>();
  readonly #max: number;
  readonly #maxLines: number;
  readonly #now: () => number;

  constructor(options: RecorderOptions = {}) {
    this.#max = options.maxExecutions ?? 500;
    this.#maxLines = options.maxLinesPerAttempt ?? 200;
    this.#now = options.now ?? Date.now;
  }

  /** Subscribes to the daemon's events: claims, attempts, outcomes and reports. */
  listen(events: WorkerEvents): void {
    events.on('claim', ({ task, executionId, resumed }) => {
      const record = this.#record(executionId, task);
      record.resumed = resumed;
    });
    events.on('attempt', (e) => {
      const record = this.#record(e.executionId, e.task);
      const attempt = this.#attempt(record, e.attempt);
      if (e.phase === 'start') {
        attempt.startedAt = this.#now();
        return;
      }
      attempt.durationMs = e.durationMs;
      attempt.result = e.result;
      if (e.error) attempt.error = e.error;
    });
    events.on('outcome', ({ task, executionId, outcome }) => {
      this.#record(executionId, task).outcome = {
        status: outcome.status,
        attempts: outcome.attempts,
        durationMs: outcome.durationMs,
        ...(outcome.failure ? { failure: `${outcome.failure.kind}: ${outcome.failure.message}` } : {}),
      };
    });
    events.on('report', ({ task, executionId, result, attempts }) => {
      this.#record(executionId, task).report = { result, attempts, at: this.#now() };
    });
  }

  /** One JSON log line of the daemon: kept with its attempt when it names one, else ignored. */
  logLine(text: string): void {
    let line: Record<string, unknown>;
    try {
      line = JSON.parse(text) as Record<string, unknown>;
    } catch {
      return;
    }
    const { executionId, attempt, taskKey } = line;
    if (typeof executionId !== 'string') return;
    const record =
      this.#executions.get(executionId) ??
      this.#record(executionId, typeof taskKey === 'string' ? taskKey : '');
    const target = typeof attempt === 'number' ? this.#attempt(record, attempt).lines : record.lines;
    if (target.length >= this.#maxLines) return;
    const fields = Object.fromEntries(Object.entries(line).filter(([k]) => !BINDINGS.has(k)));
    target.push({
      at: typeof line.time === 'string' ? line.time : new Date(this.#now()).toISOString(),
      level: levelName(line.level),
      msg: typeof line.msg === 'string' ? cut(line.msg) : '',
      fields: Object.keys(fields).length > 0 ? cut(JSON.stringify(fields)) : '',
    });
  }

  get(executionId: string): WorkerExecution | undefined {
    return this.#executions.get(executionId);
  }

  /** Newest first. */
  all(): WorkerExecution[] {
    return [...this.#executions.values()].reverse();
  }

  #record(executionId: string, task: string): WorkerExecution {
    let record = this.#executions.get(executionId);
    if (!record) {
      record = { executionId, task, claimedAt: this.#now(), resumed: false, attempts: [], lines: [] };
      this.#executions.set(executionId, record);
      if (this.#executions.size > this.#max) {
        this.#executions.delete(this.#executions.keys().next().value!);
      }
    }
    return record;
  }

  #attempt(record: WorkerExecution, attempt: number): AttemptRecord {
    let found = record.attempts.find((a) => a.attempt === attempt);
    if (!found) {
      // A line relayed from a handler worker may arrive before its attempt's start event is heard.
      found = { attempt, startedAt: this.#now(), lines: [] };
      record.attempts.push(found);
      record.attempts.sort((a, b) => a.attempt - b.attempt);
    }
    return found;
  }
}

const LEVELS: Record<number, string> = {
  10: 'trace',
  20: 'debug',
  30: 'info',
  40: 'warn',
  50: 'error',
  60: 'fatal',
};

function levelName(level: unknown): string {
  return typeof level === 'number'
    ? (LEVELS[level] ?? String(level))
    : typeof level === 'string'
      ? level
      : '';
}

function cut(text: string): string {
  return text.length > MAX_TEXT_CHARS
    ? `${text.slice(0, MAX_TEXT_CHARS)}… (${text.length} characters)`
    : text;
}
