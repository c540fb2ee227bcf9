// Issue 26's scenarios in one list, for bench/faults-report.ts: each returns the service's tally, how the key's
// budget was spent, whether its goal was met, and a line of detail.
import type { BudgetFigures, ScenarioFigures, Tally } from './rig.ts';
import { HANDLER_MEMORY_SCENARIOS } from './handler-memory-scenarios.ts';
import { METRICS_FLOOD_SCENARIOS } from './metrics-flood-scenarios.ts';
import { NETWORK_SCENARIOS } from './network-scenarios.ts';
import { STATE_DAMAGE_SCENARIOS } from './state-damage-scenarios.ts';

export interface Issue26Result {
  /** The scenario's goal reached within its time (the test's assertions hold); false: see the figures. */
  completed: boolean;
  figures: ScenarioFigures;
  tally: Tally;
  budget: BudgetFigures;
  detail: string;
}

export interface Issue26Scenario {
  name: string;
  run: () => Promise<Issue26Result>;
}

export const ISSUE_26_SCENARIOS: Issue26Scenario[] = [
  ...NETWORK_SCENARIOS,
  ...HANDLER_MEMORY_SCENARIOS,
  ...STATE_DAMAGE_SCENARIOS.map(({ name, run }) => ({
    name,
    run: async (): Promise<Issue26Result> => {
      const r = await run();
      const { figures, budget } = r;
      const completed =
        figures.lost === 0 &&
        budget.rateLimited === 0 &&
        budget.maxPerSecond <= 5 &&
        budget.maxPerMinute <= 50;
      return { ...r, completed };
    },
  })),
  ...METRICS_FLOOD_SCENARIOS.map(({ name, run }) => ({
    name,
    run: async (): Promise<Issue26Result> => {
      const r = await run();
      // The issue's bound: 3/4 of the unflooded report rate, /healthz within 1 s, the daemon up.
      const completed =
        r.daemonRunning && r.floodedRate >= 0.75 * r.unfloodedRate && r.probes.slowestMs < 1_000;
      return { ...r, completed };
    },
  })),
];
