import { Writable } from 'node:stream';
import { chmod, mkdir, mkdtemp, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock/manual-clock.ts';
import { fileNameForExecution } from '../../src/journal/file-name.ts';
import { describeJournal } from '../../src/journal/journal-contents.ts';
import {
  Journal,
  JournalEntryNotFoundError,
  JournalUnavailableError,
  JournalWriteError,
} from '../../src/journal/journal.ts';
import type { ClaimRecord, JournalLogger, OutcomeRecord } from '../../src/journal/journal.ts';

let stateDir: string;
let journalDir: string;
let deadLetterDir: string;

beforeEach(async () => {
  stateDir = await mkdtemp(join(tmpdir(), 'df-worker-journal-'));
  journalDir = join(stateDir, 'journal');
  deadLetterDir = join(stateDir, 'dead-letter');
});

afterEach(async () => {
  await chmod(journalDir, 0o700).catch(() => undefined);
  await rm(stateDir, { recursive: true, force: true });
});

function claim(executionId: string, claimedAt = '2026-01-01T10:00:00.000Z'): ClaimRecord {
  return {
    executionId,
    taskId: 'task-1',
    taskKey: 'resize-image',
    input: { url: 'https://example.test/a.png', size: 64 },
    createdAt: '2026-01-01T09:59:00.000Z',
    claimedAt,
  };
}

const completed: OutcomeRecord = {
  status: 'COMPLETED',
  output: { width: 64 },
  attempts: 2,
  finishedAt: '2026-01-01T10:00:05.000Z',
};

function recordingLogger() {
  const warnings: { fields: Record<string, unknown>; message: string }[] = [];
  const logger: JournalLogger = { warn: (fields, message) => warnings.push({ fields, message }) };
  return { logger, warnings };
}

function openJournal(logger: JournalLogger = recordingLogger().logger, clock = new ManualClock()) {
  return Journal.open(stateDir, { logger, clock });
}

/** Makes the journal folder refuse writes for real, whoever runs the tests, and says how to undo it. */
async function breakJournalFolder(): Promise<{
  code: string;
  explanation: string;
  repair: () => Promise<void>;
}> {
  if (process.getuid?.() !== 0) {
    await chmod(journalDir, 0o500);
    return { code: 'EACCES', explanation: 'is not writable', repair: () => chmod(journalDir, 0o700) };
  }
  // Root ignores permission bits, so the folder is replaced by a regular file: every write then fails
  // with ENOTDIR, as it would after an operator's mistake or a volume that failed to mount.
  await rm(journalDir, { recursive: true });
  await writeFile(journalDir, 'not a folder');
  return {
    code: 'ENOTDIR',
    explanation: 'is missing or is not a folder',
    repair: async () => {
      await rm(journalDir);
      await mkdir(journalDir, { mode: 0o700 });
    },
  };
}

/**
 * Takes the journal folder away with its records (a volume that failed to mount) and leaves a regular file
 * in its place, so every write fails whoever runs the tests; bringBack() restores the folder as it was.
 */
async function moveJournalFolderAway(): Promise<{ bringBack: () => Promise<void> }> {
  const aside = join(stateDir, 'journal-away');
  await rename(journalDir, aside);
  await writeFile(journalDir, 'not a folder');
  return {
    bringBack: async () => {
      await rm(journalDir);
      await rename(aside, journalDir);
    },
  };
}

describe('Journal lifecycle', () => {
  it('leaves no file once a claimed execution is reported and completed', async () => {
    const journal = await openJournal();
    await journal.recordClaim(claim('exec-1'));
    expect(journal.counts).toEqual({ pending: 1, deadLettered: 0 });
    await journal.recordOutcome('exec-1', completed);
    await journal.recordReportAttempt('exec-1');
    await journal.complete('exec-1');

    expect(journal.counts).toEqual({ pending: 0, deadLettered: 0 });
    expect(await readdir(journalDir)).toEqual([]);
    expect(await readdir(deadLetterDir)).toEqual([]);
    expect((await readdir(stateDir)).sort()).toEqual(['dead-letter', 'journal']);
  });

  it('returns claimed and finished executions after a restart, oldest claim first', async () => {
    const before = await openJournal();
    await before.recordClaim(claim('late', '2026-01-01T10:05:00.000Z'));
    await before.recordClaim(claim('early', '2026-01-01T10:00:00.000Z'));
    await before.recordOutcome('early', completed);
    await before.recordReportAttempt('early');
    await before.recordReportAttempt('early');

    const after = await openJournal();
    expect(after.counts).toEqual({ pending: 2, deadLettered: 0 });
    expect(await after.pending()).toEqual([
      {
        ...claim('early', '2026-01-01T10:00:00.000Z'),
        phase: 'finished',
        outcome: completed,
        reportAttempts: 2,
        starts: 1,
        version: 1,
      },
      {
        ...claim('late', '2026-01-01T10:05:00.000Z'),
        phase: 'claimed',
        reportAttempts: 0,
        starts: 1,
        version: 1,
      },
    ]);
    await after.complete('early');
    expect((await after.pending()).map((entry) => entry.executionId)).toEqual(['late']);
  });

  it('writes a claim that carries its outcome as finished in one record, so a replay never runs it', async () => {
    const failed: OutcomeRecord = {
      status: 'FAILED',
      output: { error: 'unusable' },
      attempts: 0,
      finishedAt: '2026-01-01T10:00:00.000Z',
    };
    const before = await openJournal();
    await before.recordClaim(claim('unusable'), failed);
    expect((await readdir(journalDir)).filter((name) => !name.startsWith('.'))).toHaveLength(1);

    const after = await openJournal();
    expect(await after.pending()).toEqual([
      // Never run: no start counted.
      { ...claim('unusable'), phase: 'finished', outcome: failed, reportAttempts: 0, starts: 0, version: 1 },
    ]);
  });

  it('keeps operations on one execution in call order even when the caller does not wait', async () => {
    const journal = await openJournal();
    const steps = [
      journal.recordClaim(claim('exec-1')),
      journal.recordOutcome('exec-1', completed),
      journal.recordReportAttempt('exec-1'),
      journal.complete('exec-1'),
    ];
    await Promise.all(steps);
    expect(await readdir(journalDir)).toEqual([]);
    expect(journal.counts.pending).toBe(0);
  });

  it('never brings back an execution completed while the folder is being scanned', async () => {
    const journal = await openJournal();
    const ids = Array.from({ length: 10 }, (_, i) => `exec-${i}`);
    await Promise.all(ids.map((id) => journal.recordClaim(claim(id))));
    const completing = ids.map((id) => journal.complete(id));
    const scanned = await journal.pending();
    await Promise.all(completing);

    expect(scanned.length === 0 || scanned.length === ids.length).toBe(true);
    expect(journal.counts.pending).toBe(0);
    expect(await journal.pending()).toEqual([]);
  });

  it('refuses an outcome for an execution it holds no claim of, and stays writable', async () => {
    const journal = await openJournal();
    const error = await journal.recordOutcome('never-claimed', completed).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(JournalEntryNotFoundError);
    expect((error as Error).message).toContain('never-claimed');
    expect(journal.writable).toBe(true);
  });

  it('keeps what was recorded, not the caller objects changed afterwards', async () => {
    const journal = await openJournal();
    const record = claim('exec-1');
    await journal.recordClaim(record);
    record.input.size = 999;
    const [entry] = await journal.pending();
    expect(entry?.input).toEqual({ url: 'https://example.test/a.png', size: 64 });
  });
});

describe('Journal ids', () => {
  it("stores ids with '/', '..', spaces and unicode inside the journal folder and reads them back", async () => {
    const ids = ['a/b', '..', '../../escape', 'with space', 'héllo-€-日本', '%2F', 'x'.repeat(300)];
    const journal = await openJournal();
    for (const [i, id] of ids.entries()) {
      await journal.recordClaim(claim(id, `2026-01-01T10:00:0${i}.000Z`));
    }
    const files = await readdir(journalDir, { withFileTypes: true });
    expect(files.filter((file) => file.isFile())).toHaveLength(ids.length);
    expect((await readdir(stateDir)).sort()).toEqual(['dead-letter', 'journal']);

    const reopened = await openJournal();
    expect((await reopened.pending()).map((entry) => entry.executionId)).toEqual(ids);
    for (const id of ids) await reopened.complete(id);
    expect(await readdir(journalDir)).toEqual([]);
  });
});

describe('Journal recovery of damaged files', () => {
  it('keeps truncated, garbage, wrong-shape and misnamed records in place as damaged (their names give the execution), sets aside a file whose name gives none, one warning each', async () => {
    const first = await openJournal();
    await first.recordClaim(claim('good-1'));
    await first.recordClaim(claim('good-2', '2026-01-01T10:01:00.000Z'));
    const goodText = await readFile(join(journalDir, 'good-1.json'), 'utf8');
    const damaged = {
      'truncated.json': goodText.slice(0, goodText.length / 2),
      'garbage.json': '\u0000\u00ff binary garbage',
      'wrong-shape.json': JSON.stringify({ version: 2, executionId: 'wrong-shape' }),
      'misnamed.json': goodText,
    };
    const foreign = { 'notes.v2.json': '{"foreign": true}' };
    for (const [name, text] of Object.entries({ ...damaged, ...foreign })) {
      await writeFile(join(journalDir, name), text);
    }

    const lines: string[] = [];
    const sink = new Writable({
      write: (chunk: Buffer, _encoding, done) => (lines.push(chunk.toString()), done()),
    });
    const reopened = await openJournal(pino(sink));

    expect((await reopened.pending()).map((entry) => entry.executionId)).toEqual(['good-1', 'good-2']);
    // A second scan (the daemon's, after open's) warns of nothing new.
    const warnings = lines.map((line) => JSON.parse(line) as { level: number; file: string; msg: string });
    expect(warnings).toHaveLength(5);
    for (const name of Object.keys({ ...damaged, ...foreign })) {
      const warning = warnings.find((w) => w.file === join(journalDir, name));
      expect(warning?.level).toBe(40);
      expect(warning?.msg).toContain(name);
    }
    expect(
      reopened
        .damaged()
        .map((d) => d.executionId)
        .sort(),
    ).toEqual(['garbage', 'misnamed', 'truncated', 'wrong-shape']);
    expect(reopened.counts.pending).toBe(6);
    const setAside = await readdir(join(journalDir, 'corrupt'));
    expect(setAside).toHaveLength(1);
    expect(await readFile(join(journalDir, 'corrupt', setAside[0]!), 'utf8')).toBe(foreign['notes.v2.json']);
    expect((await readdir(journalDir)).sort()).toEqual(
      ['corrupt', 'good-1.json', 'good-2.json', ...Object.keys(damaged)].sort(),
    );
  });

  it('removes temp files left by a write that was killed, keeping the previous record', async () => {
    const first = await openJournal();
    await first.recordClaim(claim('exec-1'));
    const leftovers = ['.exec-1.json.4242.a1b2c3d4e5f6.tmp', '.df-worker-probe-4242-a1b2c3d4e5f6'];
    for (const name of leftovers) await writeFile(join(journalDir, name), '{"executionId":"exe');

    const { logger, warnings } = recordingLogger();
    const reopened = await openJournal(logger);
    expect(await reopened.pending()).toMatchObject([{ executionId: 'exec-1', phase: 'claimed' }]);
    expect(await readdir(journalDir)).toEqual(['exec-1.json']);
    expect(warnings).toEqual([]);
  });
});

describe('Journal dead letters', () => {
  it('moves a record to the dead-letter folder with the service answer', async () => {
    const clock = new ManualClock(Date.UTC(2026, 0, 1, 10, 1));
    const journal = await openJournal(undefined, clock);
    await journal.recordClaim(claim('a/b'));
    await journal.recordOutcome('a/b', completed);
    await journal.recordReportAttempt('a/b');
    const answer = { status: 400, code: 'BAD_REQUEST', message: 'output key "width" is unknown' };
    await journal.deadLetter('a/b', answer);

    expect(await readdir(journalDir)).toEqual([]);
    expect(await readdir(deadLetterDir)).toEqual([`${fileNameForExecution('a/b')}.json`]);
    expect(journal.counts).toEqual({ pending: 0, deadLettered: 1 });
    const expected = {
      entry: {
        ...claim('a/b'),
        phase: 'finished',
        outcome: completed,
        reportAttempts: 1,
        starts: 1,
        version: 1,
      },
      deadAt: '2026-01-01T10:01:00.000Z',
      answer,
    };
    expect(await journal.deadLetters()).toEqual([expected]);

    const reopened = await openJournal();
    expect(reopened.counts).toEqual({ pending: 0, deadLettered: 1 });
    expect(await reopened.deadLetters()).toEqual([expected]);
  });

  it('finishes a dead-lettering that a kill interrupted after the letter was written', async () => {
    const journal = await openJournal();
    await journal.recordClaim(claim('exec-1'));
    const record = await readFile(join(journalDir, 'exec-1.json'), 'utf8');
    await journal.deadLetter('exec-1', { status: 422 });
    await writeFile(join(journalDir, 'exec-1.json'), record);

    const reopened = await openJournal();
    expect(await reopened.pending()).toEqual([]);
    expect(await readdir(journalDir)).toEqual([]);
    expect(reopened.counts).toEqual({ pending: 0, deadLettered: 1 });
  });

  it('discards a dead letter for good, once', async () => {
    const journal = await openJournal();
    await journal.recordClaim(claim('exec-1'));
    await journal.recordOutcome('exec-1', completed);
    await journal.deadLetter('exec-1', { status: 403 });
    expect(await journal.discardDeadLetter('exec-1')).toBe(true);
    expect(journal.counts).toEqual({ pending: 0, deadLettered: 0 });
    expect(await journal.discardDeadLetter('exec-1')).toBe(false);
    expect(await (await openJournal()).deadLetters()).toEqual([]);
  });
});

describe('Journal on a folder that refuses writes', () => {
  it('turns unwritable with a JournalWriteError that says why, until recheck() finds the folder fixed', async () => {
    const journal = await openJournal();
    const broken = await breakJournalFolder();

    const error = await journal.recordClaim(claim('exec-1')).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(JournalWriteError);
    const writeError = error as JournalWriteError;
    expect(writeError.executionId).toBe('exec-1');
    expect(writeError.folder).toBe(journalDir);
    expect(writeError.cause).toMatchObject({ code: broken.code });
    expect(writeError.message).toBe(
      `could not record the claim of execution exec-1: state folder ${journalDir} ${broken.explanation} ` +
        `(${broken.code}): df-worker stops claiming executions until it is writable`,
    );
    expect(journal.writable).toBe(false);
    expect(journal.lastError).toBe(writeError);
    expect(journal.counts.pending).toBe(0);

    expect(await journal.recheck()).toBe(false);
    expect(journal.writable).toBe(false);

    await broken.repair();
    expect(await journal.recheck()).toBe(true);
    expect(journal.writable).toBe(true);
    expect(journal.lastError).toBeUndefined();
    await journal.recordClaim(claim('exec-1'));
    expect(await readdir(journalDir)).toEqual(['exec-1.json']);
  });

  it('removes, at the next successful recheck(), a record whose removal failed while the folder was away', async () => {
    const journal = await openJournal();
    await journal.recordClaim(claim('exec-1'));
    await journal.recordClaim(claim('exec-2', '2026-01-01T10:01:00.000Z'));
    await journal.recordOutcome('exec-1', completed);
    const away = await moveJournalFolderAway();

    const error = await journal.complete('exec-1').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(JournalWriteError);
    expect((error as JournalWriteError).executionId).toBe('exec-1');
    expect(journal.writable).toBe(false);
    expect(await journal.recheck()).toBe(false);

    await away.bringBack();
    expect(await readdir(journalDir)).toEqual(['exec-1.json', 'exec-2.json']);
    expect(await journal.recheck()).toBe(true);
    expect(journal.writable).toBe(true);
    expect((await journal.pending()).map((entry) => entry.executionId)).toEqual(['exec-2']);
    expect(await readdir(journalDir)).toEqual(['exec-2.json']);
    const reopened = await openJournal();
    expect((await reopened.pending()).map((entry) => entry.executionId)).toEqual(['exec-2']);
  });

  it('recovers at recheck() even when the folder comes back without the record it failed to remove', async () => {
    const journal = await openJournal();
    await journal.recordClaim(claim('exec-1'));
    const broken = await breakJournalFolder();
    await expect(journal.complete('exec-1')).rejects.toBeInstanceOf(JournalWriteError);

    await broken.repair();
    expect(await journal.recheck()).toBe(true);
    expect(journal.lastError).toBeUndefined();
    expect(journal.counts.pending).toBe(0);
    expect(await journal.pending()).toEqual([]);
    // The leftover removal is done: a later recheck has nothing to redo and a second complete is harmless.
    expect(await journal.recheck()).toBe(true);
    await journal.complete('exec-1');
    expect(await readdir(journalDir)).toEqual([]);
  });

  it('refuses to open on a state folder that cannot exist, naming the folder and what to do', async () => {
    const blocker = join(stateDir, 'blocker');
    await writeFile(blocker, 'a file where a folder should be');
    const error = await Journal.open(join(blocker, 'state'), recordingLogger()).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(JournalUnavailableError);
    const unavailable = error as JournalUnavailableError;
    expect(unavailable.folder).toBe(join(blocker, 'state', 'journal'));
    expect(unavailable.cause).toMatchObject({ code: 'ENOTDIR' });
    expect(unavailable.message).toContain(join(blocker, 'state', 'journal'));
    expect(unavailable.message).toContain('choose another state folder');
  });
});

describe('describeJournal', () => {
  it('reports pending records, dead letters and corrupt files without moving anything', async () => {
    const journal = await openJournal();
    await journal.recordClaim(claim('exec-1'));
    await journal.recordClaim(claim('exec-2'));
    await journal.deadLetter('exec-2', { status: 400, message: 'bad output' });
    await writeFile(join(journalDir, 'broken.json'), '{');
    await writeFile(join(journalDir, '.exec-1.json.1.abc.tmp'), '{');
    const listing = async () => [...(await readdir(journalDir)), ...(await readdir(deadLetterDir))].sort();
    const before = await listing();

    const described = await describeJournal(stateDir);
    expect(described.pending.map((entry) => entry.executionId)).toEqual(['exec-1']);
    expect(described.deadLetters).toMatchObject([
      { entry: { executionId: 'exec-2' }, answer: { status: 400 } },
    ]);
    expect(described.corrupt).toEqual([join(journalDir, 'broken.json')]);
    expect(await listing()).toEqual(before);
  });

  it('describes an absent state folder as empty without creating it', async () => {
    const absent = join(stateDir, 'absent');
    expect(await describeJournal(absent)).toEqual({ pending: [], deadLetters: [], corrupt: [] });
    expect(await readdir(stateDir)).toEqual([]);
  });
});
