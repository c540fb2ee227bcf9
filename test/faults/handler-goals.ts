// Issue 9's goals, common to every handler-fault row: nothing claimed goes unreported, the service never
// answers 429, the healthy task is never held up longer than one poll interval (here with a loaded
// machine's slack, see LOADED_MACHINE_SLACK_MS), the daemon stays up (or,
// where a handler takes the process down, is back after its supervisor restarted it).
import { expect } from 'vitest';
import { POLL_INTERVAL_MS, type ExecutionFate, type HandlerFaultResult } from './handler-rig.ts';

/**
 * What the suite allows beyond one poll interval for the healthy task's pickup, in ms: on a loaded 2-core
 * machine (forks beside each other, busy loops) a daemon and the emulator are scheduled late by up to about
 * a second, which a quiet machine never shows (bench:faults holds the figure to the poll interval alone).
 * A fault that does hold the healthy task up (a blocked event loop: 6 s and more) stays far beyond it.
 */
const LOADED_MACHINE_SLACK_MS = 1_500;

export function expectIssueGoals(
  result: HandlerFaultResult,
  options: {
    /** Exits the row allows (each then answered by a restart); default none: the daemon stays up. */
    exits?: number;
    /** Whether the healthy task's pickup is held to one poll interval (not when the daemon itself dies). */
    heldUp?: boolean;
    /**
     * Whether every healthy report must be COMPLETED with the right output (default). Not when the daemon
     * dies: healthy executions running at each death share the faulty one's fate (see expectHealthyReported).
     */
    outputs?: boolean;
    /**
     * Claims the row may lose in the window no client can close (helm/README.md, guarantees): a process killed
     * between the service's answer to a poll and the fsync of the claim. Only where a handler takes the
     * whole process down at a moment of its choosing (isolation none); default 0.
     */
    lostInClaimWindow?: number;
  } = {},
): void {
  const { figures, tally } = result;
  // Soft: a failing row lists every goal it misses, not only the first.
  expect
    .soft(figures.lost, 'claimed executions without a report')
    .toBeLessThanOrEqual(options.lostInClaimWindow ?? 0);
  expect.soft(figures.rateLimited, '429 answers from the service').toBe(0);
  if (options.outputs ?? true) {
    expect.soft(tally.wrong, 'healthy reports with a wrong status or output').toBe(0);
  }
  if (options.heldUp ?? true) {
    expect
      .soft(figures.heldUpMs, 'healthy work held up beyond normal, ms')
      .toBeLessThanOrEqual(POLL_INTERVAL_MS + LOADED_MACHINE_SLACK_MS);
  }
  expect.soft(figures.liveness.unexpectedExits, 'unexpected exits of the daemon').toBe(options.exits ?? 0);
  expect.soft(figures.liveness.gaveUp, 'supervisor gave up').toBe(false);
  expect.soft(figures.liveness.responsive, 'daemon answering /healthz after the fault').toBe(true);
}

/**
 * Every healthy execution handed out reported once, COMPLETED, except one that was running each of the
 * `maxCrashes` times the daemon died: DF_MAX_CRASHES_PER_EXECUTION fails it as it fails the faulty one,
 * since a daemon that died cannot tell which of the executions it ran killed it.
 */
export function expectHealthyReported(
  healthy: ExecutionFate[],
  maxCrashes: number,
  lostInClaimWindow = 0,
): void {
  // Lost in the claim window: handed out, never journaled, so never run and never reported.
  const lost = healthy.filter((e) => e.claimed && e.runs === 0 && e.reports.length === 0);
  expect(lost.length, 'healthy executions lost between poll answer and claim fsync').toBeLessThanOrEqual(
    lostInClaimWindow,
  );
  for (const execution of healthy.filter((e) => e.claimed && !lost.includes(e))) {
    const statuses = execution.reports.map((r) => r.status);
    if (execution.runs >= maxCrashes && statuses[0] === 'FAILED') expect(statuses).toEqual(['FAILED']);
    else expect(statuses, `reports of healthy ${execution.id}`).toEqual(['COMPLETED']);
  }
}

/** Matches one report of an ExecutionFate: FAILED, its error matching `pattern`. */
export function failedReport(pattern: RegExp): unknown {
  return expect.objectContaining({ status: 'FAILED', error: expect.stringMatching(pattern) as unknown });
}
