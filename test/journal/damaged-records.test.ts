import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock/manual-clock.ts';
import { fileNameForExecution } from '../../src/journal/file-name.ts';
import { executionIdOfRecordFile } from '../../src/journal/journal-folder.ts';
import { Journal } from '../../src/journal/journal.ts';
import { requestsShownByJournal } from '../../src/journal/journal-contents.ts';
import type { ClaimRecord, JournalLogger } from '../../src/journal/journal.ts';
import { checkJournalRecord, serializeJournalEntry } from '../../src/journal/records.ts';

let stateDir: string;
let journalDir: string;

beforeEach(async () => {
  stateDir = await mkdtemp(join(tmpdir(), 'df-worker-damaged-'));
  journalDir = join(stateDir, 'journal');
});

afterEach(async () => {
  await rm(stateDir, { recursive: true, force: true });
});

function claim(executionId: string, claimedAt = '2026-11-02T10:00:00.000Z'): ClaimRecord {
  return { executionId, taskId: 'task-1', taskKey: 'digest', input: { text: 'a', n: 1 }, claimedAt };
}

function recordingLogger() {
  const warnings: { fields: Record<string, unknown>; message: string }[] = [];
  const logger: JournalLogger = { warn: (fields, message) => warnings.push({ fields, message }) };
  return { logger, warnings };
}

const open = (logger = recordingLogger().logger) =>
  Journal.open(stateDir, { logger, clock: new ManualClock() });

describe('journal record checksums', () => {
  it('writes a checksum with every record and reads the record back without it', async () => {
    const journal = await open();
    await journal.recordClaim(claim('ex-1'));
    const onDisk = JSON.parse(await readFile(join(journalDir, 'ex-1.json'), 'utf8')) as Record<
      string,
      unknown
    >;
    expect(onDisk.checksum).toMatch(/^[0-9a-f]{64}$/);
    const [entry] = await (await open()).pending();
    expect(entry).toMatchObject({ executionId: 'ex-1', input: { text: 'a', n: 1 } });
    expect(entry).not.toHaveProperty('checksum');
  });

  it('treats a record whose bytes still parse but were changed after the write as damaged, keeping it in place', async () => {
    await (await open()).recordClaim(claim('ex-edited'));
    const file = join(journalDir, 'ex-edited.json');
    await writeFile(file, (await readFile(file, 'utf8')).replace('"n": 1', '"n": 1000'));
    const { logger, warnings } = recordingLogger();
    const journal = await open(logger);
    expect(await journal.pending()).toEqual([]);
    expect(journal.damaged()).toEqual([
      {
        executionId: 'ex-edited',
        file,
        problem:
          'not a journal record: its checksum does not match its content (changed after it was written)',
      },
    ]);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]!.message).toContain('execution ex-edited is fetched from the service');
    expect(await readdir(journalDir)).toEqual(['ex-edited.json']);
  });

  it('reads records written before checksums existed as they are', async () => {
    await open();
    const old = { ...claim('ex-old'), phase: 'claimed', reportAttempts: 0, version: 1 };
    await writeFile(join(journalDir, 'ex-old.json'), `${JSON.stringify(old, null, 2)}\n`);
    const journal = await open();
    expect(await journal.pending()).toMatchObject([{ executionId: 'ex-old', phase: 'claimed' }]);
    expect(journal.damaged()).toEqual([]);
  });

  it('checks the checksum of an entry with nested input and an outcome, key order kept', () => {
    const entry = {
      ...claim('ex-2'),
      input: { b: [1, { z: null, a: 'x' }], a: 'é', '10': 2, '2': 1 },
      phase: 'finished' as const,
      outcome: {
        status: 'COMPLETED' as const,
        output: { y: 1 },
        attempts: 1,
        finishedAt: '2026-11-02T10:00:01.000Z',
      },
      reportAttempts: 2,
      version: 1 as const,
    };
    const checked = checkJournalRecord(JSON.parse(serializeJournalEntry(entry)));
    expect(checked).toEqual({
      ok: true,
      value: JSON.parse(JSON.stringify(entry)) as unknown,
      origin: 'current',
    });
    const edited = JSON.parse(serializeJournalEntry(entry)) as { reportAttempts: number };
    edited.reportAttempts = 0;
    expect(checkJournalRecord(edited).ok).toBe(false);
  });
});

describe('damaged journal records', () => {
  it('settles a damaged record: a copy is kept and a new record of the execution replaces it', async () => {
    await open();
    await writeFile(join(journalDir, 'ex-cut.json'), '{"executionId": "ex-');
    const journal = await open();
    expect(journal.damaged().map((d) => d.executionId)).toEqual(['ex-cut']);
    await journal.keepDamagedCopy('ex-cut');
    await journal.recordClaim(claim('ex-cut'));
    expect(journal.damaged()).toEqual([]);
    const corrupt = await readdir(join(journalDir, 'corrupt'));
    expect(corrupt).toHaveLength(1);
    expect(await readFile(join(journalDir, 'corrupt', corrupt[0]!), 'utf8')).toBe('{"executionId": "ex-');
    expect(await (await open()).pending()).toMatchObject([{ executionId: 'ex-cut', phase: 'claimed' }]);
  });

  it('dismisses a damaged record that needs no report: moved to corrupt/, with the reason in the warning', async () => {
    await open();
    await writeFile(join(journalDir, 'ex-done.json'), 'garbage');
    const { logger, warnings } = recordingLogger();
    const journal = await open(logger);
    await journal.dismissDamaged('ex-done', 'the service already holds its outcome (COMPLETED)');
    expect(journal.damaged()).toEqual([]);
    expect(await readdir(journalDir)).toEqual(['corrupt']);
    expect(warnings.at(-1)!.message).toMatch(/already holds its outcome \(COMPLETED\); moved it to/);
    const reopened = await open();
    expect(reopened.damaged()).toEqual([]);
    expect(await reopened.pending()).toEqual([]);
  });

  it('a damaged record stays damaged across restarts until it is settled', async () => {
    await open();
    await writeFile(join(journalDir, 'ex-a.json'), '[1, 2');
    expect((await open()).damaged()).toHaveLength(1);
    expect((await open()).damaged()).toHaveLength(1);
    expect(await readdir(journalDir)).toEqual(['ex-a.json']);
  });

  it('finds the execution of a hashed (too long) name in the bytes, only when it gives that very name', () => {
    const id = `ex-${'x'.repeat(300)}`;
    const name = `${fileNameForExecution(id)}.json`;
    expect(executionIdOfRecordFile(name, `{"version": 1, "executionId": ${JSON.stringify(id)}, "inp`)).toBe(
      id,
    );
    expect(executionIdOfRecordFile(name, '{"executionId": "ex-other", "inp')).toBeUndefined();
    expect(executionIdOfRecordFile(name, 'garbage')).toBeUndefined();
    expect(executionIdOfRecordFile('a%2Fb.json', 'garbage')).toBe('a/b');
    expect(executionIdOfRecordFile('notes.v2.json', 'garbage')).toBeUndefined();
  });
});

describe('what the journal shows of past use', () => {
  it('says whether the state folder was used before', async () => {
    expect((await open()).usedBefore).toBe(false);
    expect((await open()).usedBefore).toBe(true);
  });

  it('counts one request per claim and one per report attempt', async () => {
    const journal = await open();
    await journal.recordClaim(claim('ex-1'));
    await journal.recordClaim(claim('ex-2', '2026-11-02T11:00:00.000Z'), {
      status: 'FAILED',
      output: {},
      attempts: 0,
      finishedAt: '2026-11-02T11:00:01.000Z',
    });
    await journal.recordReportAttempt('ex-2');
    await journal.recordReportAttempt('ex-2');
    expect(requestsShownByJournal(await journal.pending())).toEqual([
      Date.parse('2026-11-02T10:00:00.000Z'),
      Date.parse('2026-11-02T11:00:00.000Z'),
      Date.parse('2026-11-02T11:00:01.000Z'),
      Date.parse('2026-11-02T11:00:01.000Z'),
    ]);
  });
});
