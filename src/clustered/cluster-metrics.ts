// Clustered mode's metrics: states read at each scrape (which replica coordinates, the queue's depth by state,
// the replicas alive and their handler slots, and how saturated those slots are: what the chart's HPA and KEDA
// ScaledObject scale on), and the errors Redis gave, by kind, counted from the `redisError` event. The Helm
// chart's alerts and dashboard use exactly these names.
import type { WorkerEvents } from '../events/worker-events.ts';
import { Counter, Gauge, type Registry } from '../telemetry/prometheus.ts';
import { REDIS_ERROR_KINDS } from './redis-health.ts';

export const QUEUE_STATES = ['waiting', 'active', 'delayed', 'failed'] as const;
export type QueueCounts = Record<(typeof QUEUE_STATES)[number], number>;

export interface ClusterMetricsSource {
  replica: string;
  coordinator: () => boolean;
  /** As of the last heartbeat; undefined before the first. */
  queue: () => QueueCounts | undefined;
  replicas: () => number;
  /** Handler slots of the replicas alive (the sum of their concurrency), as of the last heartbeat. */
  slots: () => number;
}

export function registerClusterMetrics(
  registry: Registry,
  events: WorkerEvents,
  source: ClusterMetricsSource,
): void {
  new Gauge({
    name: 'dfworker_cluster_coordinator',
    help: 'Whether this replica holds the coordinator lease (1) and polls for the cluster, or not (0).',
    labelNames: ['replica'],
    registers: [registry],
    collect() {
      this.reset();
      this.set({ replica: source.replica }, source.coordinator() ? 1 : 0);
    },
  });
  new Gauge({
    name: 'dfworker_cluster_queue_jobs',
    help: "Executions in the cluster's queue by state (waiting, active, delayed for a retry, failed: dead letters).",
    labelNames: ['state'],
    registers: [registry],
    collect() {
      const counts = source.queue();
      if (!counts) return;
      for (const state of QUEUE_STATES) this.set({ state }, counts[state]);
    },
  });
  new Gauge({
    name: 'dfworker_cluster_replicas',
    help: 'Replicas of the cluster seen alive (a heartbeat in the last 6 seconds).',
    registers: [registry],
    collect() {
      this.set(source.replicas());
    },
  });
  new Gauge({
    name: 'dfworker_cluster_handler_slots',
    help: 'Handler slots of the replicas seen alive: the sum of their concurrency.',
    registers: [registry],
    collect() {
      this.set(source.slots());
    },
  });
  new Gauge({
    name: 'dfworker_cluster_saturation',
    help: "Share of the cluster's handler slots taken: claimed executions running or waiting for a slot, over the slots. 1 = every slot taken; the coordinator claims only while one is free, so further work waits at the service. The autoscaling signal.",
    registers: [registry],
    collect() {
      // Executions delayed for a retry wait for their time, not for a slot: they are left out.
      const counts = source.queue();
      const slots = source.slots();
      if (!counts || slots <= 0) return;
      this.set((counts.waiting + counts.active) / slots);
    },
  });
  const redisErrors = new Counter({
    name: 'dfworker_redis_errors_total',
    help: 'Errors met on the connection to Redis, by kind: auth, tls, oom (Redis full, refusing writes), readonly (a replica), unreachable, timeout, other.',
    labelNames: ['kind'],
    registers: [registry],
  });
  // Every kind from 0, so that increase() sees the first one.
  for (const kind of REDIS_ERROR_KINDS) redisErrors.inc({ kind }, 0);
  events.on('redisError', ({ kind }) => redisErrors.inc({ kind }));
}
