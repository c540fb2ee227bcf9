// Issue 36's rows of items 2 and 5 (helper E), for bench/faults-report.ts: the lead appends them to
// ISSUE_36_SCENARIOS. Each returns the service's tally, how the key's budget was spent, whether its goal was
// met, and a line of detail, as Issue26Result does.
import type { Issue26Result } from './issue-26-scenarios.ts';
import { handlerChildrenOutliveTimeout } from './handler-children-scenarios.ts';
import { redeliveredWhileReplicaRuns, redeliveredWhileRunning } from './redelivery-scenarios.ts';

export interface Issue36OnceResult extends Issue26Result {
  /** Handler runs of the execution the scenario is about. */
  runs?: number;
  /** Reports the service received for it. */
  reports?: number;
  /** Lines handlers' child processes wrote after the FAILED report. */
  linesAfterReport?: number;
  /** Handlers' child processes still alive once the daemon exited. */
  aliveAfterExit?: number;
}

export interface Issue36OnceScenario {
  name: string;
  run: () => Promise<Issue36OnceResult>;
}

export const ISSUE_36_ONCE_SCENARIOS: Issue36OnceScenario[] = [
  { name: 'the execution being run delivered again by a poll (standalone)', run: redeliveredWhileRunning },
  // Needs redis-server (DF_TEST_REDIS_SERVER names another binary).
  { name: 'the execution being run delivered again by a poll (clustered)', run: redeliveredWhileReplicaRuns },
  {
    name: 'a handler whose children (attached, detached) outlive its 3 s timeout (process isolation)',
    run: () => handlerChildrenOutliveTimeout('process'),
  },
  {
    name: 'a handler whose children (attached, detached) outlive its 3 s timeout (thread isolation)',
    run: () => handlerChildrenOutliveTimeout('thread'),
  },
];
