// Successor pacing's learned delays in the state folder (real files in a temp dir): saved and taken back
// across a restart like the arrival profile, and a damaged file is ignored (the caller logs it), not fatal.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock/manual-clock.ts';
import {
  loadSuccessorDelays,
  saveSuccessorDelays,
  SUCCESSOR_DELAYS_FILE,
} from '../../src/scheduler/profile-store.ts';
import { SuccessorPacing } from '../../src/scheduler/successor-pacing.ts';

const successor = { job: 'enrich', from: 0, to: 3, task: 'translate', builtInsBetween: 2 };

describe('the successor delays in the state folder', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'dfw-delays-'));
  });
  afterEach(() => rm(dir, { recursive: true, force: true }));

  it('survives a restart: the learned delays place the first poll of the new process', async () => {
    const clock = new ManualClock(0);
    const before = new SuccessorPacing(clock);
    for (const delay of [40_000, 42_000, 44_000]) {
      before.reported(successor, 'r');
      before.arrived('translate', clock.now() + delay, 'r');
      clock.set(clock.now() + 3_600_000);
    }
    await saveSuccessorDelays(dir, before);

    const after = new SuccessorPacing(clock);
    expect(await loadSuccessorDelays(dir, after)).toEqual({ result: 'restored' });
    expect(after.delaysOf(successor)).toEqual([40_000, 42_000, 44_000]);
    after.reported(successor, 'r4');
    expect(after.nextPollAt('translate')! - clock.now()).toBe(40_500);
  });

  it('starts afresh without a file, and ignores a damaged one, naming what is wrong', async () => {
    const pacing = new SuccessorPacing(new ManualClock(0));
    expect(await loadSuccessorDelays(dir, pacing)).toEqual({ result: 'fresh' });
    const file = path.join(dir, SUCCESSOR_DELAYS_FILE);
    await writeFile(file, '{"version": 1, "delaysMs": {"enrich#0>3": [400');
    const cut = await loadSuccessorDelays(dir, pacing);
    expect(cut.result).toBe('unreadable');
    await writeFile(file, JSON.stringify({ arrivals: [1, 2] }));
    expect(await loadSuccessorDelays(dir, pacing)).toEqual({
      result: 'unreadable',
      problem: `${file} does not hold successor delays`,
    });
    expect(pacing.snapshot().delaysMs).toEqual({});
  });
});
