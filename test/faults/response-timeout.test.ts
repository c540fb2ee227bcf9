// Issue 35, item 3: the service takes back executions whose claim outlived its response timeout, in both of
// Conductor's re-queue modes; the daemon loses none, dead-letters each refused report once, sends it once, and
// polls for the copy at once.
import { describe, expect, it } from 'vitest';
import { EXECUTIONS, PICKUP_GOAL_MS, responseTimeoutScenario } from './response-timeout-scenarios.ts';

describe('executions the service takes back (response timeout)', () => {
  for (const mode of ['new-execution', 'same-id'] as const) {
    it(`${mode}: lost 0, run once, each refused report a dead letter once and sent once, the copy claimed within ${PICKUP_GOAL_MS} ms of its refusal`, async () => {
      const { figures, completed, detail } = await responseTimeoutScenario(mode);
      const executions = EXECUTIONS[mode];
      expect(figures.lost, detail).toBe(0);
      expect(figures.wrong, detail).toBe(0);
      expect(figures.duplicated, detail).toBe(0);
      if (mode === 'new-execution') {
        expect(figures.refused, detail).toBe(executions);
      } else {
        // A lapsed claim is refused, or claimed again while its run goes on: then it is a redelivery, not run
        // again, whose report the service takes as the new claim's (issue 36, item 2). A claim taken again may
        // lapse again, so the counts overlap; duplicated 0 above says no execution was reported twice.
        expect(figures.refused + figures.countedRedeliveries, detail).toBeGreaterThanOrEqual(1);
      }
      expect(figures.deadLetters, detail).toBe(figures.refused);
      expect(figures.countedRefusals, detail).toBe(figures.refused);
      // No loop: each refused PATCH went once, and at most one GET per refusal asked whether an earlier
      // attempt was applied; each copy's report the service took at the first try.
      expect(figures.reportRequests, detail).toBe(executions + figures.refused);
      expect(figures.acceptedReports, detail).toBe(executions);
      expect(figures.executionGets, detail).toBeLessThanOrEqual(figures.refused);
      if (figures.refused > 0) {
        // Brought forward by the refusal: the next idle poll is a minute away at this budget.
        expect(figures.slowestPickupAfterRefusalMs, detail).not.toBeNull();
        expect(figures.slowestPickupAfterRefusalMs!, detail).toBeLessThanOrEqual(PICKUP_GOAL_MS);
      }
      expect(completed, detail).toBe(true);
    }, 30_000);
  }
});
