// The execution pipeline's events mapped onto the worker's metrics: in-flight executions, pickup, handler and
// report latencies, outcomes. Shared by the standalone and the clustered wiring.
import type { Clock } from '../clock/clock.ts';
import type { WorkerMetrics } from '../telemetry/metrics.ts';
import type { PipelineObserver } from './execution-pipeline.ts';

/** `journalCounts`: the journal's records owed and dead letters (standalone), read after each report. */
export function pipelineMetrics(
  m: WorkerMetrics,
  clock: Clock,
  journalCounts?: () => { pending: number; deadLettered: number } | undefined,
): PipelineObserver {
  // Outcome instants by execution id, for the report latency; removed once the report ends.
  const finishedAt = new Map<string, number>();
  return {
    resumed: () => m.inFlight.inc(),
    claimed: (task, execution) => {
      m.inFlight.inc();
      const created = Date.parse(execution.createdAt);
      if (Number.isFinite(created)) {
        m.pickupLatency.observe({ task }, Math.max(0, clock.now() - created) / 1000);
      }
    },
    finished: (task, executionId, outcome) => {
      m.executions.inc({ task, outcome: outcome.status });
      m.handlerDuration.observe({ task, outcome: outcome.status }, outcome.durationMs / 1000);
      m.attempts.observe({ task }, outcome.attempts);
      finishedAt.set(executionId, clock.now());
    },
    reported: (task, executionId, result, attempts) => {
      m.inFlight.dec();
      m.reports.inc({ task, result });
      m.reportAttempts.observe({ task }, attempts);
      const at = finishedAt.get(executionId);
      finishedAt.delete(executionId);
      if (at !== undefined && result === 'delivered') {
        m.reportLatency.observe({ task }, (clock.now() - at) / 1000);
      }
      const counts = journalCounts?.();
      if (counts) {
        m.journalPending.set(counts.pending);
        m.journalDeadLettered.set(counts.deadLettered);
      }
    },
  };
}
