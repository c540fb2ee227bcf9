import { cp, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Journal } from '../../src/journal/journal.ts';
import { checkJournalRecord } from '../../src/journal/records.ts';

// Real records of older releases (see fixtures/older-releases/README.md for the commit that wrote each).
const FIXTURES = join(import.meta.dirname, 'fixtures', 'older-releases');

let stateDir: string;
let warnings: string[];
let infos: string[];
const logger = {
  warn: (_fields: Record<string, unknown>, message: string) => void warnings.push(message),
  info: (_fields: Record<string, unknown>, message: string) => void infos.push(message),
};

beforeEach(async () => {
  stateDir = await mkdtemp(join(tmpdir(), 'df-worker-older-records-'));
  warnings = [];
  infos = [];
});

afterEach(async () => {
  await rm(stateDir, { recursive: true, force: true });
});

async function openWith(release: string): Promise<Journal> {
  await cp(join(FIXTURES, release), join(stateDir, 'journal'), { recursive: true });
  return Journal.open(stateDir, { logger });
}

async function corruptFolder(): Promise<string[]> {
  return readdir(join(stateDir, 'journal', 'corrupt')).catch(() => []);
}

describe('records written by older releases', () => {
  it.each(['19f0023', 'ceb8c10'])('reads and upgrades records of %s (no checksum)', async (release) => {
    const journal = await openWith(release);
    const pending = await journal.pending();
    expect(pending.map((entry) => [entry.executionId, entry.phase])).toEqual([
      ['exec-claimed', 'claimed'],
      ['exec-finished', 'finished'],
    ]);
    expect(pending[1]!.outcome).toMatchObject({ status: 'COMPLETED', output: { done: true } });
    expect(pending[1]!.reportAttempts).toBe(1);
    expect(journal.damaged()).toEqual([]);
    expect(await corruptFolder()).toEqual([]);
    expect(warnings).toEqual([]);
    expect(infos).toHaveLength(2);
    // Upgraded in place: the file now carries this release's checksum, and says so when read back.
    const text = await readFile(join(stateDir, 'journal', 'exec-finished.json'), 'utf8');
    const checked = checkJournalRecord(JSON.parse(text));
    expect(checked).toMatchObject({ ok: true, origin: 'current' });
  });

  it('reads a record whose stale checksum the previous release carried along, as that release left it', async () => {
    const journal = await openWith('stale-checksum');
    const pending = await journal.pending();
    const byId = new Map(pending.map((entry) => [entry.executionId, entry]));
    expect([...byId.keys()].sort()).toEqual(['exec-stale-attempt', 'exec-stale-outcome', 'exec-stale-start']);
    expect(byId.get('exec-stale-outcome')).toMatchObject({
      phase: 'finished',
      outcome: { status: 'COMPLETED' },
    });
    expect(byId.get('exec-stale-start')).toMatchObject({ phase: 'claimed', starts: 2 });
    expect(journal.damaged()).toEqual([]);
    expect(await corruptFolder()).toEqual([]);
    expect(warnings).toEqual([]);
    // A later step of this release on the upgraded record is still read back as sound.
    await journal.recordOutcome('exec-stale-start', {
      status: 'FAILED',
      output: { error: 'x' },
      attempts: 1,
      finishedAt: '2026-12-01T12:00:05.000Z',
    });
    const again = await Journal.open(stateDir, { logger });
    expect((await again.pending()).find((e) => e.executionId === 'exec-stale-start')?.phase).toBe('finished');
    expect(again.damaged()).toEqual([]);
  });

  it('still sets aside a record whose content was changed after it was written', async () => {
    await cp(join(FIXTURES, 'stale-checksum'), join(stateDir, 'journal'), { recursive: true });
    const file = join(stateDir, 'journal', 'exec-stale-outcome.json');
    const record = JSON.parse(await readFile(file, 'utf8')) as { input: Record<string, unknown> };
    record.input.sku = 'EDITED';
    await writeFile(file, JSON.stringify(record, null, 2));
    const journal = await Journal.open(stateDir, { logger });
    expect(journal.damaged().map((damaged) => damaged.executionId)).toEqual(['exec-stale-outcome']);
    expect(warnings.join('\n')).toMatch(/checksum does not match/);
  });
});
