// `df-worker journal`: a state folder written through the Journal class, shown as tables and as JSON, and a
// missing folder reported without failing.
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { formatJournal, journalCommand } from '../../src/cli/commands/journal.ts';
import { ManualClock } from '../../src/clock/manual-clock.ts';
import { describeJournal } from '../../src/journal/journal-contents.ts';
import { Journal } from '../../src/journal/journal.ts';
import { captureOutput, cli, tempDir } from './run-cli.ts';

const silent = { warn: () => undefined };

/** A state folder holding one claimed execution, one finished but unreported, and one dead letter. */
async function stateWithJournal(): Promise<string> {
  const stateDir = await tempDir();
  const clock = new ManualClock(Date.parse('2026-03-04T05:06:07.000Z'));
  const journal = await Journal.open(stateDir, { logger: silent, clock });
  const claim = (executionId: string, taskKey: string, claimedAt: string) =>
    journal.recordClaim({ executionId, taskId: `id-${taskKey}`, taskKey, input: { n: 1 }, claimedAt });
  await claim('exec-claimed', 'csv-to-records', '2026-03-04T05:00:00.000Z');
  await claim('exec-finished', 'notify-webhook', '2026-03-04T05:01:00.000Z');
  await journal.recordOutcome('exec-finished', {
    status: 'FAILED',
    output: { error: 'boom' },
    attempts: 3,
    finishedAt: '2026-03-04T05:02:00.000Z',
  });
  await journal.recordReportAttempt('exec-finished');
  await journal.recordReportAttempt('exec-finished');
  await claim('exec-dead', 'enrich-product', '2026-03-04T04:00:00.000Z');
  await journal.recordOutcome('exec-dead', {
    status: 'COMPLETED',
    output: {},
    attempts: 1,
    finishedAt: '2026-03-04T04:00:01.000Z',
  });
  await journal.deadLetter('exec-dead', { status: 404, code: 'NOT_FOUND', message: 'Execution not found' });
  return stateDir;
}

describe('formatJournal', () => {
  it('lists pending executions and dead letters as aligned tables', async () => {
    const stateDir = await stateWithJournal();
    expect(formatJournal(stateDir, await describeJournal(stateDir))).toBe(
      [
        `journal at ${stateDir}`,
        '',
        'pending executions: 2',
        '  ID             TASK            PHASE              CLAIMED AT                REPORT ATTEMPTS',
        '  exec-claimed   csv-to-records  claimed            2026-03-04T05:00:00.000Z  0',
        '  exec-finished  notify-webhook  finished (FAILED)  2026-03-04T05:01:00.000Z  2',
        '',
        'dead letters: 1',
        "  ID         TASK            DEAD AT                   SERVICE'S ANSWER",
        '  exec-dead  enrich-product  2026-03-04T05:06:07.000Z  404 NOT_FOUND: Execution not found',
        '',
        'corrupt files: 0',
        '',
      ].join('\n'),
    );
  });
});

describe('df-worker journal', () => {
  it('prints the pending executions and the dead letters of a state folder', async () => {
    const stateDir = await stateWithJournal();
    const result = await cli(['journal', '--state-dir', stateDir]);
    expect(result).toMatchObject({ code: 0, stderr: '' });
    expect(result.stdout).toMatch(/^ {2}exec-claimed +csv-to-records +claimed /m);
    expect(result.stdout).toMatch(/^ {2}exec-finished +notify-webhook +finished \(FAILED\) .* 2$/m);
    expect(result.stdout).toMatch(/^ {2}exec-dead +enrich-product .* 404 NOT_FOUND: Execution not found$/m);
  });

  it('prints the raw records as JSON with --json', async () => {
    const stateDir = await stateWithJournal();
    const result = await cli(['journal', '--json'], { DF_STATE_DIR: stateDir });
    expect(result.code).toBe(0);
    const parsed = JSON.parse(result.stdout) as Awaited<ReturnType<typeof describeJournal>>;
    expect(parsed.pending.map((e) => [e.executionId, e.phase, e.reportAttempts])).toEqual([
      ['exec-claimed', 'claimed', 0],
      ['exec-finished', 'finished', 2],
    ]);
    expect(parsed.deadLetters).toEqual([
      expect.objectContaining({ answer: { status: 404, code: 'NOT_FOUND', message: 'Execution not found' } }),
    ]);
    expect(parsed.corrupt).toEqual([]);
  });

  it('says there is no journal, and exits 0, when the state folder does not exist', async () => {
    const stateDir = path.join(await tempDir(), 'never-started');
    const result = await captureOutput(() => journalCommand.run(['--state-dir', stateDir]));
    expect(result).toEqual({ code: 0, stdout: `no journal at ${stateDir}\n`, stderr: '' });
    const json = await captureOutput(() => journalCommand.run(['--state-dir', stateDir, '--json']));
    expect(JSON.parse(json.stdout)).toEqual({ pending: [], deadLetters: [], corrupt: [] });
  });
});
