// Builds the budget and the service client from the configuration: one place, shared by the daemon and by
// CLI commands that talk to the service, so every request of a key counts against the same budget.
import { ServiceClient, type ResponseEvent } from '../api/client.ts';
import { Budget } from '../budget/budget.ts';
import { fileBudgetStore } from '../budget/store.ts';
import type { BackoffOptions } from '../clock/backoff.ts';
import type { Clock } from '../clock/clock.ts';
import type { WorkerConfig } from '../config/schema.ts';

export function budgetFromConfig(config: WorkerConfig, clock: Clock, reportReserve = 0): Budget {
  return new Budget({
    limits: config.budget,
    clock,
    timeZone: config.budget.timeZone,
    reserveFraction: config.budget.reserve,
    safetyMarginMs: config.budget.safetyMarginMs,
    rateLimitPauseMs: config.scheduler.rateLimitPauseMs,
    reportReserve,
    store: fileBudgetStore(config.state.dir),
  });
}

/** The back-off of every retry (handler attempts, reports, polls, the task list at start). */
export function backoffFromConfig(config: WorkerConfig): BackoffOptions {
  return { baseMs: config.scheduler.retryBaseMs, maxMs: config.scheduler.errorBackoffMaxMs };
}

export function clientFromConfig(
  config: WorkerConfig,
  budget: Budget,
  onResponse?: (event: ResponseEvent) => void,
): ServiceClient {
  return new ServiceClient({
    baseUrl: config.api.url,
    apiKey: config.api.key,
    authMode: config.api.authMode,
    pathStyle: config.api.pathStyle,
    connectTimeoutMs: config.api.connectTimeoutMs,
    headersTimeoutMs: config.api.headersTimeoutMs,
    bodyTimeoutMs: config.api.bodyTimeoutMs,
    requestTimeoutMs: config.api.requestTimeoutMs,
    gate: budget,
    ...(onResponse ? { onResponse } : {}),
  });
}
