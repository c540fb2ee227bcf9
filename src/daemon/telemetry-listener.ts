// The one place that turns the core's events into metrics and log lines: in-flight executions, pickup,
// handler and report latencies, outcomes, polls, requests, the journal, handler workers, 429 pauses. Both
// modes go through it, so a dashboard reads the same in standalone and clustered mode.
import type { Logger } from 'pino';
import type { RateLimitPause } from '../budget/budget.ts';
import { monotonicAt, type Clock } from '../clock/clock.ts';
import type { ServiceClock } from '../clock/service-clock.ts';
import { POLL_ANSWER_LOSSES, type WorkerEvents } from '../events/worker-events.ts';
import type { WorkerMetrics } from '../telemetry/metrics.ts';

export function listenForTelemetry(
  events: WorkerEvents,
  m: WorkerMetrics,
  logger: Logger,
  clock: Clock,
  /** The service's clock as the client learnt it, once there is a client: createdAt is on it. */
  serviceClock: () => ServiceClock | undefined = () => undefined,
): void {
  // Outcome instants by execution id, for the report latency; removed once the report ends.
  const finishedAt = new Map<string, number>();
  const rateLimitPause = logRateLimitPause(logger);
  events.on('poll', ({ task, result }) => m.polls.inc({ task, result }));
  events.on('pollAnswerLost', ({ task, reason }) => m.pollAnswersLost.inc({ task, reason }));
  events.on('response', (e) => m.observeResponse(e.operation, e.status, e.durationMs));
  events.on('rateLimited', rateLimitPause);
  events.on('apiKeyFile', ({ result }) => m.apiKeyFileReads.inc({ result }));
  events.on('tasks', ({ served, withoutTask }) => {
    m.observeTaskMatch(served.length, withoutTask);
    // Present at 0 for each task served, so increase() in an alert sees the first lost answer too.
    for (const task of served) {
      for (const reason of POLL_ANSWER_LOSSES) m.pollAnswersLost.inc({ task, reason }, 0);
    }
  });
  events.on('claim', ({ task, createdAt, resumed }) => {
    m.inFlight.inc();
    const created = resumed || createdAt === undefined ? NaN : Date.parse(createdAt);
    if (!Number.isFinite(created)) return;
    const arrivedAt = serviceClock()?.monotonicAt(created) ?? monotonicAt(clock, created);
    m.pickupLatency.observe({ task }, Math.max(0, clock.monotonic() - arrivedAt) / 1000);
  });
  events.on('outcome', ({ task, executionId, outcome }) => {
    m.executions.inc({ task, outcome: outcome.status });
    m.handlerDuration.observe({ task, outcome: outcome.status }, outcome.durationMs / 1000);
    m.attempts.observe({ task }, outcome.attempts);
    finishedAt.set(executionId, clock.monotonic());
  });
  events.on('report', ({ task, executionId, result, attempts }) => {
    m.inFlight.dec();
    m.reports.inc({ task, result });
    m.reportAttempts.observe({ task }, attempts);
    const at = finishedAt.get(executionId);
    finishedAt.delete(executionId);
    if (at !== undefined && result === 'delivered')
      m.reportLatency.observe({ task }, (clock.monotonic() - at) / 1000);
  });
  events.on('reportRefused', ({ status, code }) =>
    m.reportsRefused.inc({ reason: refusalReason(status, code) }),
  );
  events.on('fenced', ({ request, task, executionId }) => {
    m.fenced.inc({ request });
    if (request !== 'report' || executionId === undefined) return;
    // The execution leaves this process unreported: another owner reports it.
    m.inFlight.dec();
    finishedAt.delete(executionId);
    logger.debug({ task, executionId }, 'report fenced');
  });
  events.on('redelivered', ({ task, where }) => m.redelivered.inc({ task, where }));
  events.on('journal', ({ pending, deadLettered }) => {
    m.journalPending.set(pending);
    m.journalDeadLettered.set(deadLettered);
  });
  events.on('replay', ({ phase }) => m.replayed.inc({ phase }));
  events.on('lease', ({ held, reason }) => {
    if (held) logger.info('took the coordinator lease: polling for the cluster');
    else logger.info({ reason }, 'stopped polling for the cluster');
  });
  events.on('handlerWorker', (e) => {
    if (e.started) {
      m.handlerWorkers.inc();
    } else {
      m.handlerWorkers.dec();
      m.handlerWorkerExits.inc({ reason: e.reason });
    }
  });
}

/**
 * The `reason` label of a refused report: the status, and the service's code when it looks like one (an
 * upper-case word), so an odd body cannot grow the label set: `409_CONFLICT`, `404_NOT_FOUND`, `410`.
 */
export function refusalReason(status: number, code: string | undefined): string {
  return code !== undefined && /^[A-Z][A-Z0-9_]{0,39}$/.test(code) ? `${status}_${code}` : String(status);
}

/**
 * Says, once per pause, that a 429 paused every request: how long the service asked (Retry-After) and how long
 * the budget took. One line per pause, however many requests met the 429 at once.
 */
export function logRateLimitPause(logger: Logger): (pause: RateLimitPause) => void {
  return ({ operation, retryAfterMs, pauseMs }) => {
    logger.warn(
      {
        operation,
        retryAfterMs: retryAfterMs ?? null,
        pauseMs,
        // The pause runs on the monotonic clock; its end is shown on the wall clock of the line.
        pausedUntil: new Date(Date.now() + pauseMs).toISOString(),
        ...(retryAfterMs !== undefined && retryAfterMs > pauseMs
          ? { capSetting: 'DF_RETRY_AFTER_MAX_MS' }
          : {}),
      },
      'the service answered 429 RATE_LIMIT',
    );
  };
}
