// The budget's reaction to a 429: the whole key is over a limit, whichever request met it, so every request
// pauses, for the answer's Retry-After or a default pause, never longer than a cap. It lives here alone: the
// client's callers that retry after a 429 just retry, and their next acquire waits for the pause.
import type { GateAnswer } from '../api/client.ts';
import type { Clock } from '../clock/clock.ts';
import type { EventSink } from '../events/worker-events.ts';

export type { RateLimitPause } from '../events/service-payloads.ts';

export interface RateLimitPausesOptions {
  clock: Clock;
  /** Pause after a 429 that carries no Retry-After, in ms (the budget's `rateLimitPauseMs`). */
  defaultPauseMs: number;
  /** Longest pause a 429 may impose, in ms (the budget's `retryAfterMaxMs`). */
  maxPauseMs: number;
  /** Called when a pause starts or lengthens, before it is told: requests waiting must look again. */
  wake: () => void;
  /** Where each pause a 429 starts or lengthens is told, `rateLimited` (the budget's `events`). */
  events?: Pick<EventSink, 'emit'> | undefined;
}

export class RateLimitPauses {
  readonly #options: RateLimitPausesOptions;
  #until = 0;

  constructor(options: RateLimitPausesOptions) {
    this.#options = options;
  }

  /** Monotonic instant the current pause ends; in the past when none runs. */
  get until(): number {
    return this.#until;
  }

  /**
   * Hears an answer; a 429 pauses every request. Concurrent 429s: the longest pause wins. No pause is longer
   * than `maxPauseMs`: a service (or a proxy) asking for years must not silence the daemon, reports included,
   * for as long as it runs.
   */
  observe(answer: GateAnswer): void {
    if (answer.status !== 429) return;
    const { clock, defaultPauseMs, maxPauseMs, wake, events } = this.#options;
    const asked = answer.retryAfterMs;
    const pauseMs = Math.min(Math.max(0, asked ?? defaultPauseMs), maxPauseMs);
    const untilMs = clock.monotonic() + pauseMs;
    if (untilMs <= this.#until) return;
    this.#until = untilMs;
    wake();
    try {
      events?.emit('rateLimited', {
        operation: answer.operation,
        retryAfterMs: asked,
        pauseMs,
        until: untilMs,
      });
    } catch {
      // A listener's failure must not change how the budget reacts.
    }
  }
}
