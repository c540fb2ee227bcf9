// Issue 35's scenarios in one list, for bench/faults-report.ts: item 3, executions the service takes back after
// their response timeout, in both of Conductor's re-queue modes.
import { responseTimeoutScenario, type ResponseTimeoutResult } from './response-timeout-scenarios.ts';

export type Issue35Result = ResponseTimeoutResult;

export interface Issue35Scenario {
  name: string;
  run: () => Promise<Issue35Result>;
}

/** Long enough for the baseline's idle polls (every IDLE_POLL_MS at most) to find the copies. */
const BENCH_TIMEOUT_MS = 45_000;

export const ISSUE_35_SCENARIOS: Issue35Scenario[] = [
  {
    name: '35.1 claims time out, re-queued as new executions',
    run: () => responseTimeoutScenario('new-execution', { timeoutMs: BENCH_TIMEOUT_MS }),
  },
  {
    name: '35.2 claims time out, re-queued under the same id',
    run: () => responseTimeoutScenario('same-id', { timeoutMs: BENCH_TIMEOUT_MS }),
  },
];
