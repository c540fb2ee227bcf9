// Issue 36's scenarios in one list, for bench/faults-report.ts (rows 36.x, each on a --baseline worktree and
// on this checkout): each returns the service's tally, how the key's budget was spent, whether the row's
// bounds held, and a line of detail. The clock rows run at the issue's own figures (5/s, 50/min, 400 executions).
import type { BudgetFigures, ScenarioFigures, Tally } from './rig.ts';
import {
  clockBehindFromStart,
  FULL_SIZE,
  FULL_SIZE_DEFAULT_PACE,
  stepBackClustered,
  stepBackDuringPause,
  stepBackWhileBusy,
  stepBackWhileIdle,
} from './clock-step-scenarios.ts';
import { RedisServer } from '../cluster/redis-server.ts';
import { ISSUE_36_LOCAL_SCENARIOS } from './issue-36-local-scenarios.ts';
import { ISSUE_36_ONCE_SCENARIOS } from './issue-36-once-scenarios.ts';

export interface Issue36Result {
  /** The scenario's goal reached within its time (the test's assertions hold); false: see the figures. */
  completed: boolean;
  figures: ScenarioFigures;
  tally: Tally;
  budget: BudgetFigures;
  detail: string;
}

export interface Issue36Scenario {
  name: string;
  run: () => Promise<Issue36Result>;
}

/** Rows named "36.N ...", numbered from `first`, so that `--only 36.N` picks one. */
const numbered = (first: number, scenarios: readonly Issue36Scenario[]): Issue36Scenario[] =>
  scenarios.map(({ name, run }, i) => ({ name: `36.${first + i} ${name}`, run }));

export const ISSUE_36_SCENARIOS: Issue36Scenario[] = [
  {
    name: '36.1 wall clock steps back 1 h while 400 executions wait',
    run: () => stepBackWhileBusy(FULL_SIZE),
  },
  { name: '36.2 the same step on an idle daemon', run: () => stepBackWhileIdle(FULL_SIZE) },
  {
    name: '36.3 the same step during a 60 s 429 pause, /wake included',
    run: () => stepBackDuringPause(FULL_SIZE),
  },
  {
    name: "36.4 the daemon's clock 10 min behind the service's from the start",
    run: () => clockBehindFromStart(FULL_SIZE_DEFAULT_PACE),
  },
  {
    name: '36.5 clustered: the coordinator steps back 1 h during a 60 s 429 pause',
    run: async () => {
      const redis = await RedisServer.start();
      try {
        return await stepBackClustered(redis, FULL_SIZE);
      } finally {
        await redis.dispose();
      }
    },
  },
  // Items 2 and 5: run once per claim, a handler's processes ended with its attempt.
  ...numbered(6, ISSUE_36_ONCE_SCENARIOS),
  // Items 3 and 4: local servers no page can drive, a key that changes without a restart.
  ...numbered(10, ISSUE_36_LOCAL_SCENARIOS),
];
