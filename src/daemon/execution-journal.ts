// Where an execution's claim and outcome are kept until reported, as the pipeline and its report delivery use it.
import type { Journal } from '../journal/journal.ts';

/**
 * The state folder's journal (standalone), or the cluster's queue (clustered mode,
 * src/clustered/queue-journal.ts).
 */
export type ExecutionJournal = Pick<
  Journal,
  'recordClaim' | 'recordStart' | 'recordOutcome' | 'recordReportAttempt' | 'complete' | 'deadLetter'
> &
  Partial<Pick<Journal, 'owes'>>;
