// Builds the poll planner as the daemon runs it: its settings from the configuration, and what it learnt of
// arrivals restored from the state folder, with the way to save that again (hourly and at stop).
import type { Logger } from 'pino';
import type { Budget } from '../budget/budget.ts';
import type { WorkerConfig } from '../config/schema.ts';
import type { ArrivalProfile } from '../scheduler/arrival-profile.ts';
import { PollPlanner } from '../scheduler/poll-planner.ts';
import {
  loadProfile,
  loadSuccessorDelays,
  saveProfile,
  saveSuccessorDelays,
} from '../scheduler/profile-store.ts';
import type { SuccessorPacing } from '../scheduler/successor-pacing.ts';
import { backoffFromConfig } from './service-wiring.ts';

/** The planner, and how to save what it learnt (arrival profile, successor delays; a no-op in memory). */
export interface KeptPlanner {
  planner: PollPlanner;
  saveProfile: () => Promise<void>;
}

/** The poll planner as the daemon runs it, with what it learnt of arrivals restored from the state folder. */
export async function plannerFromConfig(
  config: WorkerConfig,
  budget: Budget,
  options: { inMemory?: boolean; logger?: Logger; successors?: SuccessorPacing } = {},
): Promise<KeptPlanner> {
  let profile: ArrivalProfile | undefined;
  if (!options.inMemory) {
    const loaded = await loadProfile(config.state.dir);
    profile = loaded.profile;
    if (loaded.result === 'unreadable') {
      options.logger?.warn(
        { problem: loaded.problem },
        'the saved arrival profile could not be read; polling learns when work arrives afresh',
      );
    }
  }
  const planner = new PollPlanner({
    budget,
    maxPollIntervalMs: config.scheduler.maxPollIntervalMs,
    minPollIntervalMs: config.scheduler.minPollIntervalMs,
    errorBackoff: backoffFromConfig(config),
    ...(profile ? { profile } : {}),
    ...(options.successors ? { successors: options.successors } : {}),
  });
  const successors = options.successors;
  if (successors && !options.inMemory) {
    const loaded = await loadSuccessorDelays(config.state.dir, successors);
    if (loaded.result === 'unreadable') {
      options.logger?.warn(
        { problem: loaded.problem },
        'the saved successor delays could not be read; successor pacing learns them afresh',
      );
    }
  }
  const save = options.inMemory
    ? () => Promise.resolve()
    : async () => {
        await saveProfile(config.state.dir, planner.profile);
        if (successors) await saveSuccessorDelays(config.state.dir, successors);
      };
  return { planner, saveProfile: save };
}
