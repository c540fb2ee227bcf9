// Builds the budget and the service client from the configuration (and the back-off every retry shares): one
// place, shared by the daemon and by CLI commands that talk to the service, so every request of a key counts
// against the same budget. The poll planner is built in planner-from-config.ts.
import type { ApiKeySource } from '../secrets/api-key-file.ts';
import { ServiceClient, type RequestGate, type ServiceTransport } from '../api/client.ts';
import { Budget } from '../budget/budget.ts';
import { fileBudgetStore, type BudgetStore } from '../budget/store.ts';
import type { BackoffOptions } from '../clock/backoff.ts';
import { systemClock, type Clock } from '../clock/clock.ts';
import { systemWriterStamp } from '../clock/writer-stamp.ts';
import type { WorkerConfig } from '../config/schema.ts';
import type { EventSink } from '../events/worker-events.ts';

/**
 * `store`: where the budget survives restarts; default the state folder's budget.json. `events`: where a 429's
 * pause is told (`rateLimited`); default nowhere.
 */
export function budgetFromConfig(
  config: WorkerConfig,
  clock: Clock,
  reportReserve = 0,
  store: BudgetStore = fileBudgetStore(config.state.dir),
  events?: EventSink,
): Budget {
  return new Budget({
    retryAfterMaxMs: config.scheduler.retryAfterMaxMs,
    ...(events ? { events } : {}),
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

/** `events`: where each request is told (`response`, and `serviceCall` of a handler's); default nowhere. */
export function clientFromConfig(
  config: WorkerConfig,
  budget: RequestGate,
  events?: EventSink,
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
    ...(events ? { events } : {}),
    ...(transport ? { transport } : {}),
    ...(clock ? { clock } : {}),
  });
}
