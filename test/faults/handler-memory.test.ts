// Issue 26, item 3: handler memory is contained in the default configuration. A handler that builds big
// strings, holds big Buffers or returns a huge output fails its own attempt, once, with a message naming the
// limit; the daemon is never killed nor restarted; the six innocent executions beside it run once and are
// reported once with their right output; the service never answers 429 and sees at most 5 requests a second
// and 50 a minute. The Buffer and output rows run the daemon in a 512 MB memory cgroup (the chart's limit)
// where this machine allows one; the row at the container's limit needs it.
import { describe, expect, it } from 'vitest';
import { expectIssueGoals, failedReport } from './handler-goals.ts';
import {
  bigBuffersAtContainerLimit,
  bigBuffersHandler,
  bigOutputHandler,
  bigStringsHandler,
  contained,
  INNOCENTS,
  OUT_OF_MEMORY,
  type MemoryRowResult,
} from './handler-memory-scenarios.ts';

/** The goals every row shares; `message` is what the bad execution's FAILED report must say. */
function expectContained(result: MemoryRowResult, message: RegExp): void {
  // Pickup is paced by the key's 50 a minute here, not by the rig's 500 ms: not held to it.
  expectIssueGoals(result, { heldUp: false });
  expect.soft(result.figures.liveness.restarts, 'daemon restarts').toBe(0);
  expect.soft(result.budget.rateLimited, '429 answers').toBe(0);
  expect.soft(result.budget.maxPerSecond, 'requests in the busiest second').toBeLessThanOrEqual(5);
  expect.soft(result.budget.maxPerMinute, 'requests in the busiest minute').toBeLessThanOrEqual(50);
  expect.soft(result.figures.lost, 'claimed executions without a report').toBe(0);
  // The bad execution: one attempt (retryCount 0), one FAILED report naming the limit.
  expect.soft(result.bad.runs, 'runs of the bad execution').toBe(1);
  expect.soft(result.bad.reports, 'reports of the bad execution').toEqual([failedReport(message)]);
  // The innocents: each run once, reported once, COMPLETED (their outputs: tally.wrong in expectIssueGoals).
  expect.soft(result.innocents, 'innocent executions').toHaveLength(INNOCENTS);
  for (const innocent of result.innocents) {
    expect.soft(innocent.runs, `runs of innocent ${innocent.id}`).toBe(1);
    expect
      .soft(
        innocent.reports.map((r) => r.status),
        `reports of innocent ${innocent.id}`,
      )
      .toEqual(['COMPLETED']);
  }
  // What bench:faults reports as the row's goal reached agrees with the assertions above.
  expect(contained(result, message)).toBe(true);
}

describe('handler memory with the default configuration, beside six innocent executions, 5/s and 50/min', () => {
  it('big strings past the heap limit: the handler process dies, not the daemon; that attempt fails naming the memory limit', async () => {
    const result = await bigStringsHandler();
    expectContained(result, OUT_OF_MEMORY);
  }, 60_000);

  it('50 MB Buffers past DF_HANDLER_MEMORY_MB (off the V8 heap): the watch kills the handler process before the container limit', async () => {
    const result = await bigBuffersHandler();
    expectContained(
      result,
      /held \d+ MB more than when it started.*over the 128 MB limit \(DF_HANDLER_MEMORY_MB\)/,
    );
    // The daemon's watch, not the kernel, ended it: the cgroup (where there is one) counted no OOM kill.
    if (result.cgroup) expect(result.cgroup.oomKills).toBe(0);
  }, 60_000);

  it("50 MB Buffers past the container's memory limit: the kernel's OOM killer ends the handler process, never the daemon", async () => {
    const result = await bigBuffersAtContainerLimit();
    expectContained(result, /out-of-memory killer ended its worker process.*DF_HANDLER_MEMORY_MB=2048/);
    expect(result.cgroup?.oomKills).toBeGreaterThanOrEqual(1);
  }, 60_000);

  it('a 60 MB output in a 512 MB container: refused in the handler process by DF_HANDLER_MAX_OUTPUT_BYTES, reported FAILED once', async () => {
    const result = await bigOutputHandler();
    expectContained(
      result,
      /output is at least \d+ bytes as JSON, over the 1048576-byte output limit \(DF_HANDLER_MAX_OUTPUT_BYTES\)/,
    );
  }, 60_000);
});
