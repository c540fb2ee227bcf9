// Clustered mode's metrics, read at each scrape: which replica coordinates, the queue's depth by state, and
// the replicas alive. The Helm chart's alerts and dashboard use exactly these names.
import { Gauge, type Registry } from '../telemetry/prometheus.ts';

export const QUEUE_STATES = ['waiting', 'active', 'delayed', 'failed'] as const;
export type QueueCounts = Record<(typeof QUEUE_STATES)[number], number>;

export interface ClusterMetricsSource {
  replica: string;
  coordinator: () => boolean;
  /** As of the last heartbeat; undefined before the first. */
  queue: () => QueueCounts | undefined;
  replicas: () => number;
}

export function registerClusterMetrics(registry: Registry, source: ClusterMetricsSource): void {
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
}
