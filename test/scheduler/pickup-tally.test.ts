import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ArrivalProfile } from '../../src/scheduler/arrival-profile.ts';
import { PickupTally } from '../../src/scheduler/pickup-tally.ts';
import { loadProfile, saveProfile } from '../../src/scheduler/profile-store.ts';

const NOVEMBER = Date.UTC(2026, 10, 1);
const DECEMBER = Date.UTC(2026, 11, 1);

describe('PickupTally', () => {
  it('counts the pickups that waited longer than a time, a second-wide bin counted in part', () => {
    const tally = new PickupTally();
    for (const waitedMs of [500, 10_200, 10_700, 35_000, 90_000, 2 * 3_600_000])
      tally.add(NOVEMBER, waitedMs);
    expect(tally.count(NOVEMBER)).toBe(6);
    expect(tally.countAbove(NOVEMBER, 0)).toBe(6);
    expect(tally.countAbove(NOVEMBER, 20_000)).toBe(3);
    // Both 10.2 s and 10.7 s are in the bin [10 s, 11 s): from 10.5 s, half of it.
    expect(tally.countAbove(NOVEMBER, 10_500)).toBe(4);
    // A wait beyond the last bin (an hour) is kept in it, never lost.
    expect(tally.countAbove(NOVEMBER, 3_000_000)).toBe(1);
    expect(tally.countAbove(NOVEMBER, 5 * 3_600_000)).toBe(0);
  });

  it("keeps one month: another month's question reads nothing, and its first pickup starts afresh", () => {
    const tally = new PickupTally();
    tally.add(NOVEMBER, 60_000);
    expect(tally.count(DECEMBER)).toBe(0);
    expect(tally.countAbove(DECEMBER, 0)).toBe(0);
    tally.add(DECEMBER, 1_000);
    expect(tally.count(DECEMBER)).toBe(1);
    expect(tally.countAbove(DECEMBER, 30_000)).toBe(0);
    expect(tally.count(NOVEMBER)).toBe(0);
  });

  it('survives the state folder with the arrival profile, and a file without it (or a damaged one) reads empty', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'df-worker-pickups-'));
    try {
      const profile = new ArrivalProfile();
      profile.observe(['work'], NOVEMBER);
      profile.arrival('work', NOVEMBER + 1_000, NOVEMBER + 2_000);
      for (let i = 0; i < 50; i++) profile.pickups.add(NOVEMBER, i * 2_000);
      await saveProfile(dir, profile);
      const loaded = await loadProfile(dir);
      expect(loaded.result).toBe('restored');
      expect(loaded.profile.pickups.count(NOVEMBER)).toBe(50);
      expect(loaded.profile.pickups.countAbove(NOVEMBER, 61_000)).toBe(19);

      const { pickups: _, ...older } = profile.toState();
      expect(ArrivalProfile.fromState(older).pickups.count(NOVEMBER)).toBe(0);
      expect(ArrivalProfile.fromState(older).toState().tasks.work).toBeDefined();
      const damaged = { ...profile.toState(), pickups: { monthStartsAt: NOVEMBER, bins: { '-1': 3 } } };
      expect(ArrivalProfile.fromState(damaged).pickups.count(NOVEMBER)).toBe(0);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
