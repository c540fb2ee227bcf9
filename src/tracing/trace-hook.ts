// What the daemon core asks of tracing when it is on (sdk.ts makes it): to listen to the core's events, and to
// send the last spans at stop. A type only: the core imports nothing of OpenTelemetry.
import type { WorkerEvents } from '../daemon/events.ts';

export interface TraceHook {
  /** Turns the core's events into spans; `replica` is this replica's id in clustered mode. */
  listen: (events: WorkerEvents, info: { replica?: string }) => void;
  /**
   * Sends the spans still queued (at stop); resolves within SHUTDOWN_FLUSH_MS whether or not they got through.
   */
  flush: () => Promise<void>;
}
