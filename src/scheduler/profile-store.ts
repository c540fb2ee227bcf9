// Where the arrival profile and successor pacing's learned delays survive restarts: `arrival-profile.json`
// and `successor-delays.json` in the state folder, written durably every hour and at stop. What was learnt
// is an optimisation: a file that cannot be read starts afresh.
import path from 'node:path';
import { readJsonFile, writeFileDurably } from '../journal/durable-file.ts';
import { ArrivalProfile } from './arrival-profile.ts';
import type { SuccessorPacing } from './successor-pacing.ts';

export const PROFILE_FILE = 'arrival-profile.json';
export const SUCCESSOR_DELAYS_FILE = 'successor-delays.json';

export interface ProfileLoad {
  profile: ArrivalProfile;
  /** `restored`: read from the file; `fresh`: no file; `unreadable`: a file that is not a profile (`problem`). */
  result: 'restored' | 'fresh' | 'unreadable';
  problem?: string;
}

export async function loadProfile(stateDir: string): Promise<ProfileLoad> {
  const file = path.join(stateDir, PROFILE_FILE);
  let raw: unknown;
  try {
    raw = await readJsonFile(file);
  } catch (error) {
    return { profile: new ArrivalProfile(), result: 'unreadable', problem: (error as Error).message };
  }
  if (raw === undefined) return { profile: new ArrivalProfile(), result: 'fresh' };
  const profile = ArrivalProfile.fromState(raw);
  if (profile.toState().observedUntil === null && Object.keys(profile.toState().tasks).length === 0) {
    return { profile, result: 'unreadable', problem: `${file} does not hold an arrival profile` };
  }
  return { profile, result: 'restored' };
}

export function saveProfile(stateDir: string, profile: ArrivalProfile): Promise<void> {
  return writeFileDurably(path.join(stateDir, PROFILE_FILE), `${JSON.stringify(profile.toState())}\n`);
}

/** Takes the saved delays into `pacing`; like the profile, a file that is not theirs is ignored (`problem`). */
export async function loadSuccessorDelays(
  stateDir: string,
  pacing: SuccessorPacing,
): Promise<Omit<ProfileLoad, 'profile'>> {
  const file = path.join(stateDir, SUCCESSOR_DELAYS_FILE);
  let raw: unknown;
  try {
    raw = await readJsonFile(file);
  } catch (error) {
    return { result: 'unreadable', problem: (error as Error).message };
  }
  if (raw === undefined) return { result: 'fresh' };
  if (!pacing.restore(raw)) {
    return { result: 'unreadable', problem: `${file} does not hold successor delays` };
  }
  return { result: 'restored' };
}

export function saveSuccessorDelays(stateDir: string, pacing: SuccessorPacing): Promise<void> {
  return writeFileDurably(
    path.join(stateDir, SUCCESSOR_DELAYS_FILE),
    `${JSON.stringify(pacing.snapshot())}\n`,
  );
}
