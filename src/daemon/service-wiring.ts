// Builds the budget and the service client from the configuration (and the back-off every retry shares): one
// place, shared by the daemon and by CLI commands that talk to the service, so every request of a key counts
// against the same budget. The poll planner is built in planner-from-config.ts.
import type { ApiKeySource } from '../secrets/api-key-file.ts';
import { ServiceClient, type RequestGate, type ResponseEvent, type ServiceTransport } from '../api/client.ts';
import { Budget, type RateLimitPause } from '../budget/budget.ts';
import { fileBudgetStore, type BudgetStore } from '../budget/store.ts';
import type { BackoffOptions } from '../clock/backoff.ts';
import { systemClock, type Clock } from '../clock/clock.ts';
import { systemWriterStamp } from '../clock/writer-stamp.ts';
import type { WorkerConfig } from '../config/schema.ts';

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
