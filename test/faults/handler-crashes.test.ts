// Issue 9, rows 12 and 13: a handler that runs out of memory or calls process.exit, next to a healthy task.
// Under the default isolation only that attempt fails and the daemon stays up. Under
// DF_HANDLER_ISOLATION=none the handler takes the daemon down with it: the scenario restarts it like a
// supervisor, and the execution must end FAILED once its runs killed the daemon
// DF_MAX_CRASHES_PER_EXECUTION times, instead of taking every restart down again.
import { describe, expect, it } from 'vitest';
import { expectHealthyReported, expectIssueGoals, failedReport } from './handler-goals.ts';
import { MAX_CRASHES_PER_EXECUTION, memoryHogHandler, processExitInHandler } from './handler-scenarios.ts';

/** A FAILED report's error says the run's process or thread died (exited, crashed, was killed). */
const NAMES_A_DEATH = /exit|crash|died|killed/i;

describe('a handler that takes its process down, next to a healthy task (default isolation)', () => {
  it('running out of its DF_HANDLER_MEMORY_MB: that attempt fails naming memory, the daemon stays up, the healthy task flows', async () => {
    const result = await memoryHogHandler();
    expectIssueGoals(result);
    expect(result.hog.reports).toEqual([failedReport(/memory|heap/i)]);
    expect(result.hog.runs).toBeLessThanOrEqual(MAX_CRASHES_PER_EXECUTION);
  }, 60_000);

  it('process.exit(1) in a handler: that attempt fails, the daemon stays up, the six healthy executions are reported', async () => {
    const result = await processExitInHandler();
    expectIssueGoals(result);
    expect(result.exiting.reports).toEqual([failedReport(NAMES_A_DEATH)]);
    expect(result.exiting.runs).toBeLessThanOrEqual(MAX_CRASHES_PER_EXECUTION);
    expect(result.healthy).toHaveLength(6);
    for (const execution of result.healthy) {
      expect(execution.reports.map((r) => r.status)).toEqual(['COMPLETED']);
    }
  }, 60_000);
});

describe('a handler that takes its process down, without isolation (DF_HANDLER_ISOLATION=none)', () => {
  // Each death restarts the daemon, so the healthy task waits for restarts: not held to one poll interval.
  // The first death comes while polls run beside the handler and may take one poll answer with it (the
  // window no client can close); later ones come while the suspect reruns alone, no claim in flight.
  const recovered = { exits: MAX_CRASHES_PER_EXECUTION, heldUp: false, outputs: false, lostInClaimWindow: 1 };

  it('running out of memory kills the daemon: after DF_MAX_CRASHES_PER_EXECUTION restarts the execution is FAILED and never run again', async () => {
    const result = await memoryHogHandler({ isolation: 'none' });
    expectIssueGoals(result, recovered);
    expect(result.hog.runs).toBe(MAX_CRASHES_PER_EXECUTION);
    expect(result.hog.reports).toEqual([failedReport(NAMES_A_DEATH)]);
    expect(result.figures.liveness.restarts).toBe(MAX_CRASHES_PER_EXECUTION);
    expectHealthyReported(result.healthy, MAX_CRASHES_PER_EXECUTION, recovered.lostInClaimWindow);
  }, 60_000);

  it('process.exit(1) with DF_JOURNAL_REPLAY=rerun: FAILED after DF_MAX_CRASHES_PER_EXECUTION deaths, the six healthy executions are reported', async () => {
    const result = await processExitInHandler({ isolation: 'none' });
    expectIssueGoals(result, recovered);
    expect(result.exiting.runs).toBe(MAX_CRASHES_PER_EXECUTION);
    expect(result.exiting.reports).toEqual([failedReport(NAMES_A_DEATH)]);
    expect(result.figures.liveness.restarts).toBe(MAX_CRASHES_PER_EXECUTION);
    expect(result.healthy.map((e) => e.claimed)).toEqual(Array(6).fill(true));
    expectHealthyReported(result.healthy, MAX_CRASHES_PER_EXECUTION, recovered.lostInClaimWindow);
  }, 60_000);
});
