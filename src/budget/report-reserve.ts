// How many requests the budget holds back for reports while executions await theirs: the formula the daemon
// sets the budget's `reportReserve` by, in both modes, after every claim and report.

/**
 * The report reserve (requests polls and other calls leave to reports) while `owed` executions await their
 * report: room for each one's report and a retry, and for those of the execution the next poll may claim
 * (each poll out beyond the first is counted in `owed` by the scheduler). A claim is then always reported within
 * the month, and at its end no more than that is left unspent, where holding 2 × DF_CONCURRENCY whatever ran
 * left 8 requests (4 claims under overload) by default.
 */
export function reportReserveFor(owed: number): number {
  return 2 * (owed + 1);
}
