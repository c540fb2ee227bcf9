// Month pacing: how many requests the month allows by an instant. Polls driven by work may run a little ahead
// of an even spend of the month, never so far that the month runs out before its end.
import type { MonthWindow } from './month.ts';

/**
 * The run-ahead allowance shrinks with the time left, down to this much of it: polls may still run a little
 * ahead in the month's last hours, yet the pace reaches the whole month only in its last hour.
 */
const MIN_ALLOWANCE_SPAN_MS = 6 * 3_600_000;

/**
 * Requests the month's pace allows by `nowMs`: an even spend of the month so far, plus an allowance of
 * `reserveFraction` of the month scaled by the time left (at least 6 hours' worth, and at least a minute's
 * limit: a burst the service's windows allow anyway), capped at the month.
 */
export function paceAt(
  month: MonthWindow,
  limits: { perMinute: number; perMonth: number },
  reserveFraction: number,
  nowMs: number,
): number {
  const { startMs, endMs } = month;
  const monthMs = endMs - startMs;
  const elapsed = Math.min(1, Math.max(0, (nowMs - startMs) / monthMs));
  const left = Math.max(1 - elapsed, MIN_ALLOWANCE_SPAN_MS / monthMs);
  const { perMonth } = limits;
  const minAllowance = Math.min(limits.perMinute, perMonth);
  return Math.min(perMonth, perMonth * elapsed + Math.max(minAllowance, perMonth * reserveFraction * left));
}
