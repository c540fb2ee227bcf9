// Issue 35, item 3: the service takes back executions whose claim outlived its response timeout, in both of
// Conductor's re-queue modes; the daemon loses none, dead-letters each refused report once, sends it once, and
// polls for the copy at once.
import { describe, expect, it } from 'vitest';
import {
  EXECUTIONS,
  IDLE_POLL_MS,
  PICKUP_GOAL_MS,
  responseTimeoutScenario,
} from './response-timeout-scenarios.ts';

describe('executions the service takes back (response timeout)', () => {
  for (const mode of ['new-execution', 'same-id'] as const) {
    it(`${mode}: lost 0, each refused report a dead letter once and sent once, the copy claimed within ${PICKUP_GOAL_MS} ms of its refusal`, async () => {
      const { figures, completed, detail } = await responseTimeoutScenario(mode);
      expect(figures.lost, detail).toBe(0);
      expect(figures.wrong, detail).toBe(0);
      // new-execution: every late report is refused. same-id: one that arrives after a poll claimed its id
      // again is the new claim's to the service (no request names a claim), so at least the first is refused.
      if (mode === 'new-execution') expect(figures.refused, detail).toBe(EXECUTIONS);
      else expect(figures.refused, detail).toBeGreaterThan(0);
      expect(figures.deadLetters, detail).toBe(figures.refused);
      expect(figures.countedRefusals, detail).toBe(figures.refused);
      // No loop: each refused PATCH went once, and at most one GET per refusal asked whether an earlier
      // attempt was applied; everything else the service took at the first try.
      expect(figures.reportRequests, detail).toBe(figures.acceptedReports + figures.refused);
      expect(figures.executionGets, detail).toBeLessThanOrEqual(figures.refused);
      expect(figures.duplicated, detail).toBeLessThanOrEqual(EXECUTIONS - figures.refused);
      // Brought forward by the refusal, well before the next idle poll.
      expect(figures.slowestPickupAfterRefusalMs, detail).not.toBeNull();
      expect(figures.slowestPickupAfterRefusalMs!, detail).toBeLessThanOrEqual(PICKUP_GOAL_MS);
      expect(figures.slowestPickupAfterRefusalMs!, detail).toBeLessThan(IDLE_POLL_MS);
      expect(completed, detail).toBe(true);
    }, 30_000);
  }
});
