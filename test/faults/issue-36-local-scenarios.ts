// Issue 36's rows for the local servers and the API key (items 3 and 4), for bench/faults-report.ts in the shape
// of issue-26-scenarios.ts: the lead appends ISSUE_36_LOCAL_SCENARIOS to the issue's list. The local-server rows
// have no workload: their figures are zero and their detail counts the attacks that took effect.
import type { Issue26Result, Issue26Scenario } from './issue-26-scenarios.ts';
import { keyRotation } from './key-rotation-scenarios.ts';
import {
  devFromAnotherSite,
  emulatorFromAnotherSite,
  statusPageLeak,
  type LocalServerResult,
} from './local-servers-scenarios.ts';

const NO_WORKLOAD = {
  figures: { claimed: 0, reported: 0, duplicated: 0, lost: 0 },
  tally: { claimed: 0, reported: 0, duplicated: 0, lost: 0, wrong: 0, unclaimed: 0 },
  budget: { rateLimited: 0, maxPerSecond: 0, maxPerMinute: 0, requests: 0 },
};

function asRow(run: () => Promise<LocalServerResult>): () => Promise<Issue26Result> {
  return async () => {
    const r = await run();
    return { ...NO_WORKLOAD, completed: r.completed, detail: r.detail };
  };
}

export const ISSUE_36_LOCAL_SCENARIOS: Issue26Scenario[] = [
  {
    name: 'API key revoked, new key written to DF_API_KEY_FILE',
    run: async () => {
      const r = await keyRotation();
      return {
        completed: r.completed,
        figures: r.figures,
        tally: r.tally,
        budget: r.budget,
        detail: r.detail,
      };
    },
  },
  { name: 'df-worker emulator, a page of another site', run: asRow(emulatorFromAnotherSite) },
  { name: 'df-worker dev, a page of another site', run: asRow(devFromAnotherSite) },
  { name: 'status page, an input quoted by a handler error', run: asRow(() => statusPageLeak()) },
];
