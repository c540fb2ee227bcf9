// Prometheus metrics of one worker, in a registry of its own (tests and embedded workers do not collide).
// Names follow Prometheus conventions: `dfworker_` prefix, base units (seconds), `_total` on counters.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from './prometheus.ts';
import { OPERATIONS, type Operation } from '../api/types.ts';
import type { BudgetSnapshot } from '../budget/budget.ts';
import { registerBudgetGauges, type BudgetGauges, type PacingSnapshot } from './budget-metrics.ts';

/** How often the event-loop delay histograms (`dfworker_nodejs_eventloop_lag_*`) take a sample, in ms. */
export const EVENT_LOOP_SAMPLE_MS = 1_000;

export type PollResultLabel = 'hit' | 'empty' | 'error';

export type { PacingSnapshot } from './budget-metrics.ts';

export class WorkerMetrics {
  readonly registry = new Registry();
  readonly requests: Counter<'operation' | 'status_class'>;
  readonly rateLimited: Counter<'operation'>;
  readonly requestDuration: Histogram<'operation'>;
  readonly polls: Counter<'task' | 'result'>;
  readonly pollAnswersLost: Counter<'task' | 'reason'>;
  readonly fenced: Counter<'request'>;
  readonly redelivered: Counter<'task' | 'where'>;
  readonly pickupLatency: Histogram<'task'>;
  readonly handlerDuration: Histogram<'task' | 'outcome'>;
  readonly attempts: Histogram<'task'>;
  readonly executions: Counter<'task' | 'outcome'>;
  readonly reports: Counter<'task' | 'result'>;
  readonly reportsRefused: Counter<'reason'>;
  readonly reportAttempts: Histogram<'task'>;
  readonly reportLatency: Histogram<'task'>;
  readonly inFlight: Gauge;
  readonly journalPending: Gauge;
  readonly journalDeadLettered: Gauge;
  readonly replayed: Counter<'phase'>;
  /** The budget's windows and pace, and the planner's intervals, read at each scrape. */
  readonly budget: BudgetGauges;
  readonly ready: Gauge;
  readonly unauthorized: Counter<'operation'>;
  readonly apiKeyRefused: Gauge;
  readonly apiKeyFileReads: Counter<'result'>;
  readonly tasksServed: Gauge;
  readonly handlerTaskMissing: Gauge<'task'>;
  readonly handlerWorkers: Gauge;
  readonly handlerWorkerExits: Counter<'reason'>;

  constructor(
    options: {
      defaultMetrics?: boolean;
      budget?: () => BudgetSnapshot | undefined;
      /** What the poll planner plans now: each task's idle interval, and whether the work is overloaded. */
      pacing?: () => PacingSnapshot | undefined;
      /** Read at each scrape, so the gauge always agrees with /readyz. Without it, set by hand. */
      ready?: () => boolean;
      /** Read at each scrape: true while the service refuses the key (as /readyz says). */
      keyRefused?: () => boolean;
    } = {},
  ) {
    const registers = [this.registry];
    if (options.defaultMetrics ?? true)
      collectDefaultMetrics({
        register: this.registry,
        prefix: 'dfworker_',
        // prom-client samples the loop delay every 10 ms by default: 100 wake-ups a second of an idle daemon
        // (most of its idle CPU). Once a second still dates every stall that /healthz cares about (10 s).
        eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLE_MS,
      });
    this.requests = new Counter({
      name: 'dfworker_service_requests_total',
      help: 'Requests sent to the service, by operation and status class (2xx, 4xx, 5xx, network).',
      labelNames: ['operation', 'status_class'],
      registers,
    });
    this.rateLimited = new Counter({
      name: 'dfworker_service_rate_limited_total',
      help: 'Answers 429 RATE_LIMIT received from the service.',
      labelNames: ['operation'],
      registers,
    });
    // Present at 0 from the start, so increase() in alerts sees the first 429 too.
    for (const operation of OPERATIONS) this.rateLimited.inc({ operation }, 0);
    this.requestDuration = new Histogram({
      name: 'dfworker_service_request_duration_seconds',
      help: 'Time from sending a request to its answer (budget wait excluded).',
      labelNames: ['operation'],
      buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    });
    this.polls = new Counter({
      name: 'dfworker_polls_total',
      help: 'Polls by task and result: hit (an execution was claimed), empty, error.',
      labelNames: ['task', 'result'],
      registers,
    });
    this.fenced = new Counter({
      name: 'dfworker_fenced_total',
      help:
        'Requests dropped before they left because this replica may no longer own what they act for (clustered ' +
        'mode): report (its job lock lapsed in a stall or partition; another replica reports the execution), ' +
        'poll (its coordinator lease term ended).',
      labelNames: ['request'],
      registers,
    });
    this.redelivered = new Counter({
      name: 'dfworker_redelivered_total',
      help:
        'Executions a poll handed out again while still owed a report (running, or finished and not yet ' +
        'reported; the service re-queued them): not run again, the claim in hand reports them once. where: ' +
        'pipeline (this process runs it), queue (clustered coordinator: its job is not finished).',
      labelNames: ['task', 'where'],
      registers,
    });
    this.pollAnswersLost = new Counter({
      name: 'dfworker_poll_answers_lost_total',
      help:
        'Polls sent whose answer could not be used: the service may hold an execution claimed by this worker ' +
        'that no one will run or report. Each is logged as an error. reason: timeout (DF_API_*_TIMEOUT_MS), ' +
        'connection (closed or reset, a body cut short), shutdown (still unanswered when the shutdown ended), ' +
        'not-json (a 2xx that is not JSON, e.g. an HTML page), no-id (JSON without a usable execution id).',
      labelNames: ['task', 'reason'],
      registers,
    });
    this.pickupLatency = new Histogram({
      name: 'dfworker_pickup_latency_seconds',
      help: "From an execution's createdAt on the service to its claim by this worker.",
      labelNames: ['task'],
      buckets: [0.1, 0.5, 1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600],
      registers,
    });
    this.handlerDuration = new Histogram({
      name: 'dfworker_handler_duration_seconds',
      help: 'From claim to outcome, retries and back-off included, by task and outcome.',
      labelNames: ['task', 'outcome'],
      buckets: [0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900],
      registers,
    });
    this.attempts = new Histogram({
      name: 'dfworker_handler_attempts',
      help: 'Handler attempts per execution.',
      labelNames: ['task'],
      buckets: [0, 1, 2, 3, 5, 10],
      registers,
    });
    this.executions = new Counter({
      name: 'dfworker_executions_total',
      help: 'Executions finished, by task and outcome (COMPLETED, FAILED).',
      labelNames: ['task', 'outcome'],
      registers,
    });
    this.reports = new Counter({
      name: 'dfworker_reports_total',
      help: 'Reports by result: delivered, dead-lettered, left-in-journal (not delivered before exit).',
      labelNames: ['task', 'result'],
      registers,
    });
    this.reportsRefused = new Counter({
      name: 'dfworker_reports_refused_total',
      help:
        'Reports the service refused for good, by reason: its status and error code (e.g. 409_CONFLICT, a claim ' +
        'that outlived its response timeout). Each is dead-lettered once and never sent again.',
      labelNames: ['reason'],
      registers,
    });
    this.reportAttempts = new Histogram({
      name: 'dfworker_report_attempts',
      help: 'PATCH attempts needed per report (1 = first try).',
      labelNames: ['task'],
      buckets: [1, 2, 3, 5, 10, 20],
      registers,
    });
    this.reportLatency = new Histogram({
      name: 'dfworker_report_latency_seconds',
      help: "From a handler's outcome to the service accepting the report, retries included.",
      labelNames: ['task'],
      buckets: [0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 300],
      registers,
    });
    this.inFlight = new Gauge({
      name: 'dfworker_executions_in_flight',
      help: 'Executions claimed and not yet reported.',
      registers,
    });
    this.journalPending = new Gauge({
      name: 'dfworker_journal_pending',
      help: 'Executions recorded in the journal and not yet accepted by the service.',
      registers,
    });
    this.journalDeadLettered = new Gauge({
      name: 'dfworker_journal_dead_lettered',
      help: 'Reports the service refused for good, kept in the dead-letter folder.',
      registers,
    });
    this.replayed = new Counter({
      name: 'dfworker_journal_replayed_total',
      help: 'Journal records replayed at start, by phase (claimed: run again or failed; finished: reported).',
      labelNames: ['phase'],
      registers,
    });
    this.budget = registerBudgetGauges(registers, options.budget, options.pacing);
    const ready = options.ready;
    this.ready = new Gauge({
      name: 'dfworker_ready',
      help: '1 when the worker is ready (see /readyz).',
      registers,
      ...(ready
        ? {
            collect() {
              this.set(ready() ? 1 : 0);
            },
          }
        : {}),
    });
    this.unauthorized = new Counter({
      name: 'dfworker_service_unauthorized_total',
      help: 'Answers 401 received from the service (the key refused), by operation: while the key is refused, one request tries it per back-off step.',
      labelNames: ['operation'],
      registers,
    });
    for (const operation of OPERATIONS) this.unauthorized.inc({ operation }, 0);
    const keyRefused = options.keyRefused;
    this.apiKeyRefused = new Gauge({
      name: 'dfworker_api_key_refused',
      help: '1 while the service refuses the API key (401): nothing is claimed until a valid key is in DF_API_KEY_FILE (read again as it changes) or DF_API_KEY (after a restart).',
      registers,
      ...(keyRefused
        ? {
            collect() {
              this.set(keyRefused() ? 1 : 0);
            },
          }
        : {}),
    });
    this.apiKeyFileReads = new Counter({
      name: 'dfworker_api_key_file_reads_total',
      help: 'DF_API_KEY_FILE read again while the daemon runs, by result: changed (a new key taken), unchanged (read after a 401, still the refused key), unreadable (missing, empty or not a key: the key in use is kept).',
      labelNames: ['result'],
      registers,
    });
    for (const result of ['changed', 'unchanged', 'unreadable']) this.apiKeyFileReads.inc({ result }, 0);
    this.tasksServed = new Gauge({
      name: 'dfworker_tasks_served',
      help: 'Service tasks matched to a handler and polled.',
      registers,
    });
    this.handlerTaskMissing = new Gauge({
      name: 'dfworker_handler_task_missing',
      help: 'Set to 1 for each loaded handler whose task is not on the service (as of the last task list): it is not polled.',
      labelNames: ['task'],
      registers,
    });
    this.handlerWorkers = new Gauge({
      name: 'dfworker_handler_workers',
      help: 'Handler workers (threads or processes) alive, busy or idle (DF_HANDLER_ISOLATION).',
      registers,
    });
    this.handlerWorkerExits = new Counter({
      name: 'dfworker_handler_worker_exits_total',
      help: 'Handler workers gone, by reason: timeout (terminated past its deadline), out-of-memory, exit (process.exit), crash, terminated (shutdown), idle.',
      labelNames: ['reason'],
      registers,
    });
    for (const reason of ['timeout', 'out-of-memory', 'exit', 'crash']) {
      this.handlerWorkerExits.inc({ reason }, 0);
    }
  }

  /** What the last task list matched: the number of tasks served, and a series for each handler left without one. */
  observeTaskMatch(served: number, missing: readonly string[]): void {
    this.tasksServed.set(served);
    this.handlerTaskMissing.reset();
    for (const task of missing) this.handlerTaskMissing.set({ task }, 1);
  }

  observeResponse(operation: Operation, status: number, durationMs: number): void {
    this.requests.inc({ operation, status_class: statusClass(status) });
    if (status === 429) this.rateLimited.inc({ operation });
    if (status === 401) this.unauthorized.inc({ operation });
    this.requestDuration.observe({ operation }, durationMs / 1000);
  }

  async render(): Promise<string> {
    return this.registry.metrics();
  }
}

function statusClass(status: number): string {
  if (status === 0) return 'network';
  return `${Math.floor(status / 100)}xx`;
}
