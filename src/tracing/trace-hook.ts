// What the daemon core asks of tracing when it is on (sdk.ts makes it): to listen to the core's events and
// give its hooks, and to send the last spans at stop. A type only: the core imports nothing of OpenTelemetry.
import type { WorkerHooks } from '../events/hooks.ts';
import type { WorkerEvents } from '../events/worker-events.ts';

export interface TraceHook {
  /**
   * Turns the core's events into spans; `replica` is this replica's id in clustered mode. Returns the hooks
   * that run executions and attempts in their spans and put the trace context in queued jobs.
   */
  listen: (events: WorkerEvents, info: { replica?: string }) => WorkerHooks;
  /**
   * Sends the spans still queued (at stop); resolves within SHUTDOWN_FLUSH_MS whether or not they got through.
   */
  flush: () => Promise<void>;
}
