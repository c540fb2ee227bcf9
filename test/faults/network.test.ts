// Issue 26, rows 1, 2 and 10: every wait bounded against the network, at the service's own limits.
import { describe, expect, it } from 'vitest';
import {
  answersCutAfterTheirId,
  hostileRetryAfter,
  sigtermDuringTrickle,
  trickleBesideWork,
  unusablePollAnswers,
  type NetworkResult,
} from './network-scenarios.ts';

function expectNothingLostWithinBudget(result: NetworkResult): void {
  expect(result.completed, result.detail).toBe(true);
  expect(result.figures.lost).toBe(0);
  expect(result.figures.duplicated).toBe(0);
  expect(result.tally.wrong).toBe(0);
  expect(result.budget.maxPerSecond).toBeLessThanOrEqual(5);
  expect(result.budget.maxPerMinute).toBeLessThanOrEqual(50);
}

describe('every wait bounded against the network', () => {
  it('a poll answer that trickles (every gap under the silence limit) holds back no other task: work arriving at random is reported, the answer counted lost at DF_API_ANSWER_TIMEOUT_MS', async () => {
    const result = await trickleBesideWork();
    // The one execution the trickled answer claimed is the service's to time out: its id never arrived.
    expect(result.trickledClaimsLost).toBe(1);
    expect(result.figures.lost).toBe(1);
    expect(result.workloadLost).toBe(0);
    expectNothingLostWithinBudget({ ...result, figures: { ...result.figures, lost: result.workloadLost } });
    expect(result.budget.rateLimited).toBe(0);
    expect(result.figures.reported).toBe(12);
    // Polled at least every 2 s (DF_MAX_POLL_INTERVAL_MS) with a minute's budget to spare: seconds, not the trickle's 50 s.
    expect(result.slowestPickupMs).toBeLessThan(10_000);
    expect(result.lostAnswers['slow-feed/timeout']).toBe(1);
  }, 60_000);

  it('SIGTERM while a poll answer trickles: exit 0 within DF_SHUTDOWN_GRACE_MS and the flush window, the answer logged lost', async () => {
    const result = await sigtermDuringTrickle();
    expectNothingLostWithinBudget(result);
    expect(result.budget.rateLimited).toBe(0);
    expect(result.exitCode).toBe(0);
    // A loaded machine's margin on top of the bound: the process start and the pino flush.
    expect(result.elapsedMs).toBeLessThan(result.boundMs + 3_000);
    expect(result.lostLogged).toBe(true);
  }, 60_000);

  it('a poll answer cut short after it named its execution: the execution is read back by id and run, nothing lost', async () => {
    const result = await answersCutAfterTheirId();
    expectNothingLostWithinBudget(result);
    expect(result.budget.rateLimited).toBe(0);
    expect(result.figures.reported).toBe(6);
    expect(result.cut).toBeGreaterThanOrEqual(3);
    expect(result.readBack).toBe(3);
    expect(result.lostAnswers).toEqual({});
  }, 60_000);

  it.each([['1000000000'], ['2147484'], ['Thu, 01 Jan 2099 00:00:00 GMT']])(
    'a 429 with Retry-After %s pauses every request for DF_RETRY_AFTER_MAX_MS only, says so once, and never overflows a timer',
    async (retryAfter) => {
      const result = await hostileRetryAfter(retryAfter, 2_000);
      expectNothingLostWithinBudget(result);
      expect(result.figures.reported).toBe(6);
      expect(result.budget.rateLimited).toBe(1); // the injected one
      expect(result.nextRequestAfterMs).toBeGreaterThanOrEqual(1_950);
      expect(result.nextRequestAfterMs).toBeLessThan(8_000);
      expect(result.pauseLogs).toHaveLength(1);
      expect(result.pauseLogs[0]).toMatchObject({ pauseMs: 2_000, capSetting: 'DF_RETRY_AFTER_MAX_MS' });
      expect(result.pauseLogs[0]!.retryAfterMs).toBeGreaterThan(2_000_000_000);
      expect(result.overflowWarnings).toBe(0);
      expect(result.exitCode).toBe(0);
      expect(result.stopMs).toBeLessThan(5_000);
    },
    60_000,
  );

  it('counts a poll answer it cannot use (an HTML 200, JSON with no execution id) as lost, by reason, and goes on', async () => {
    const result = await unusablePollAnswers();
    expectNothingLostWithinBudget(result);
    expect(result.budget.rateLimited).toBe(0);
    expect(result.figures.reported).toBe(4);
    expect(result.lostAnswers).toEqual({ 'digest/not-json': 1, 'digest/no-id': 1 });
  }, 60_000);
});
