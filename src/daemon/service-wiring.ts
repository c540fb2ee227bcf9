// Builds the budget and the service client from the configuration: one place, shared by the daemon and by
// CLI commands that talk to the service, so every request of a key counts against the same budget.
import type { ApiKeySource } from '../secrets/api-key-file.ts';
import { ServiceClient, type RequestGate, type ResponseEvent, type ServiceTransport } from '../api/client.ts';
import { Budget, type RateLimitPause } from '../budget/budget.ts';
import { fileBudgetStore, type BudgetStore } from '../budget/store.ts';
import type { BackoffOptions } from '../clock/backoff.ts';
import { systemClock, type Clock } from '../clock/clock.ts';
import { systemWriterStamp } from '../clock/writer-stamp.ts';
import type { WorkerConfig } from '../config/schema.ts';
import type { Logger } from 'pino';
import type { ArrivalProfile } from '../scheduler/arrival-profile.ts';
import type { SuccessorPacing } from '../scheduler/successor-pacing.ts';
import { PollPlanner } from '../scheduler/poll-planner.ts';
import {
  loadProfile,
  loadSuccessorDelays,
  saveProfile,
  saveSuccessorDelays,
} from '../scheduler/profile-store.ts';

/** `store`: where the budget survives restarts; default the state folder's budget.json. */
export function budgetFromConfig(
  config: WorkerConfig,
  clock: Clock,
  reportReserve = 0,
  store: BudgetStore = fileBudgetStore(config.state.dir),
  onPause?: (pause: RateLimitPause) => void,
): Budget {
  return new Budget({
    retryAfterMaxMs: config.scheduler.retryAfterMaxMs,
    ...(onPause ? { onPause } : {}),
    limits: config.budget,
    clock,
    timeZone: config.budget.timeZone,
    reserveFraction: config.budget.reserve,
    safetyMarginMs: config.budget.safetyMarginMs,
    rateLimitPauseMs: config.scheduler.rateLimitPauseMs,
    reportReserve,
    store,
    // The stamp reads the system's own clocks: only a budget on them may write it.
    ...(clock === systemClock ? { writerStamp: systemWriterStamp } : {}),
  });
}

/**
 * The report reserve (requests polls and other calls leave to reports) while `owed` executions await their
 * report: room for each one's report and a retry, and for those of the execution the next poll may claim
 * (each poll out beyond the first is counted in `owed` by the scheduler). A claim is then always reported within
 * the month, and at its end no more than that is left unspent, where holding 2 × DF_CONCURRENCY whatever ran
 * left 8 requests (4 claims under overload) by default.
 */
export function reportReserveFor(owed: number): number {
  return 2 * (owed + 1);
}

/** The back-off of every retry (handler attempts, reports, polls, the task list at start). */
export function backoffFromConfig(config: WorkerConfig): BackoffOptions {
  return { baseMs: config.scheduler.retryBaseMs, maxMs: config.scheduler.errorBackoffMaxMs };
}

export function clientFromConfig(
  config: WorkerConfig,
  budget: RequestGate,
  onResponse?: (event: ResponseEvent) => void,
  transport?: ServiceTransport,
  clock?: Clock,
  apiKeySource?: ApiKeySource,
): ServiceClient {
  return new ServiceClient({
    baseUrl: config.api.url,
    apiKey: config.api.key,
    ...(apiKeySource ? { apiKeySource } : {}),
    authMode: config.api.authMode,
    pathStyle: config.api.pathStyle,
    connectTimeoutMs: config.api.connectTimeoutMs,
    headersTimeoutMs: config.api.headersTimeoutMs,
    bodyTimeoutMs: config.api.bodyTimeoutMs,
    requestTimeoutMs: config.api.requestTimeoutMs,
    answerTimeoutMs: config.api.answerTimeoutMs,
    gate: budget,
    ...(onResponse ? { onResponse } : {}),
    ...(transport ? { transport } : {}),
    ...(clock ? { clock } : {}),
  });
}

/** The poll planner as the daemon runs it, with what it learnt of arrivals restored from the state folder. */
export async function plannerFromConfig(
  config: WorkerConfig,
  budget: Budget,
  options: { inMemory?: boolean; logger?: Logger; successors?: SuccessorPacing } = {},
): Promise<PollPlanner & { save: () => Promise<void> }> {
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
  return Object.assign(planner, { save });
}

/** How often the task list is read again once every handler has its task on the service. */
export const MATCHED_TASK_REFRESH_MS = 24 * 3_600_000;

/** ... and while there is more work than the month can carry, when every request is a claim foregone. */
export const OVERLOADED_TASK_REFRESH_MS = 7 * 24 * 3_600_000;

/**
 * Time until the next task list refresh: DF_TASK_REFRESH_MS while a handler has no task on the service (one
 * may be created any time); once every handler is served, daily, or weekly while the work is more than the
 * month can carry, since each refresh is a request against the month's budget that polls could have had.
 */
export function taskRefreshIntervalMs(
  config: WorkerConfig,
  everyHandlerServed: boolean,
  overloaded = false,
): number {
  const configured = config.scheduler.taskRefreshMs;
  if (!everyHandlerServed) return configured;
  return Math.max(configured, overloaded ? OVERLOADED_TASK_REFRESH_MS : MATCHED_TASK_REFRESH_MS);
}
