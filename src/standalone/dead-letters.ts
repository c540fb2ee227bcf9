// The journal's dead letters, as an operator handles them (the console's page, df-worker dev): sent again
// through the key's budget as every report, or discarded. Only the standalone daemon keeps a journal.
import type { ServiceClient } from '../api/client.ts';
import type { CoreHandle } from '../daemon/mode.ts';
import type { Journal } from '../journal/journal.ts';
import { withFailureMessage } from '../runner/failure-output.ts';

/** What sending a dead letter's report again gave: accepted (the letter is removed), or why not. */
export type DeadLetterRetry = { delivered: true } | { delivered: false; message: string };

/** What handling a dead letter needs; each part is undefined until the daemon opened it. */
export interface DeadLetterDesk {
  journal: Journal | undefined;
  client: ServiceClient | undefined;
  core: Pick<CoreHandle, 'logger' | 'events'> | undefined;
}

/**
 * Sends a dead letter's report again, through the key's budget as every report: once the service accepts it,
 * the letter is removed. A refusal leaves it in place and says why.
 */
export async function retryDeadLetter(desk: DeadLetterDesk, executionId: string): Promise<DeadLetterRetry> {
  const { journal, client, core } = desk;
  if (!journal || !client || !core) return { delivered: false, message: 'the worker has no journal open' };
  const letter = (await journal.deadLetters()).find((l) => l.entry.executionId === executionId);
  const outcome = letter?.entry.outcome;
  if (!letter || !outcome) return { delivered: false, message: `no dead letter of ${executionId} is kept` };
  try {
    const output = outcome.status === 'FAILED' ? withFailureMessage(outcome.output) : outcome.output;
    await client.reportExecution(executionId, { status: outcome.status, output });
  } catch (error) {
    core.logger.warn({ executionId, err: error as Error }, 'a dead letter sent again was refused');
    return { delivered: false, message: error instanceof Error ? error.message : String(error) };
  }
  await journal.discardDeadLetter(executionId);
  core.logger.info({ executionId }, 'a dead letter sent again was accepted; it is removed');
  core.events.emit('journal', journal.counts);
  return { delivered: true };
}

/** Removes a dead letter without reporting it; false when none of this execution is kept. */
export async function discardDeadLetter(desk: DeadLetterDesk, executionId: string): Promise<boolean> {
  const { journal, core } = desk;
  if (!journal || !core) return false;
  const removed = await journal.discardDeadLetter(executionId);
  if (removed) {
    core.logger.info({ executionId }, 'dead letter discarded');
    core.events.emit('journal', journal.counts);
  }
  return removed;
}
