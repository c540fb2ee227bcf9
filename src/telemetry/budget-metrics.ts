// The gauges of the request budget and the poll planner, read at each scrape: each window's use and limit,
// the month's end and pace, a 429 pause, and each task's planned idle interval. Apart from the counters the
// core's events drive (metrics.ts): these follow the budget's state, not what happens.
import type { BudgetSnapshot } from '../budget/budget.ts';
import { Gauge, type Registry } from './prometheus.ts';

export interface PacingSnapshot {
  tasks: { key: string; idleIntervalMs: number }[];
  overloaded: boolean;
}

export interface BudgetGauges {
  readonly budgetUsed: Gauge<'window'>;
  readonly budgetLimit: Gauge<'window'>;
  readonly budgetRemaining: Gauge<'window'>;
  readonly budgetMonthEnd: Gauge<string>;
  readonly idlePace: Gauge<string>;
  readonly aheadOfPace: Gauge<string>;
  readonly idleInterval: Gauge<'task'>;
  readonly overloaded: Gauge<string>;
  readonly pausedSeconds: Gauge<string>;
}

export function registerBudgetGauges(
  registers: Registry[],
  budget: (() => BudgetSnapshot | undefined) | undefined,
  /** What the poll planner plans now: each task's idle interval, and whether the work is overloaded. */
  pacing: (() => PacingSnapshot | undefined) | undefined,
): BudgetGauges {
  const snapshot = () => budget?.();
  const budgetUsed = new Gauge({
    name: 'dfworker_budget_used_requests',
    help: 'Requests counted in each budget window (second, minute, month).',
    labelNames: ['window'],
    registers,
    collect() {
      const s = snapshot();
      if (!s) return;
      this.set({ window: 'second' }, s.second.used);
      this.set({ window: 'minute' }, s.minute.used);
      this.set({ window: 'month' }, s.month.used);
    },
  });
  const budgetLimit = new Gauge({
    name: 'dfworker_budget_limit_requests',
    help: 'Configured limit of each budget window.',
    labelNames: ['window'],
    registers,
    collect() {
      const s = snapshot();
      if (!s) return;
      this.set({ window: 'second' }, s.second.limit);
      this.set({ window: 'minute' }, s.minute.limit);
      this.set({ window: 'month' }, s.month.limit);
    },
  });
  const budgetRemaining = new Gauge({
    name: 'dfworker_budget_remaining_requests',
    help: 'Requests left in each budget window.',
    labelNames: ['window'],
    registers,
    collect() {
      const s = snapshot();
      if (!s) return;
      this.set({ window: 'second' }, Math.max(0, s.second.limit - s.second.used));
      this.set({ window: 'minute' }, Math.max(0, s.minute.limit - s.minute.used));
      this.set({ window: 'month' }, s.month.remaining);
    },
  });
  const budgetMonthEnd = new Gauge({
    name: 'dfworker_budget_month_end_timestamp_seconds',
    help: "When the budget's month ends and its quota resets (Unix time, in DF_BUDGET_TIME_ZONE's calendar).",
    registers,
    collect() {
      const s = snapshot();
      if (s) this.set(s.month.endsAt / 1000);
    },
  });
  const idlePace = new Gauge({
    name: 'dfworker_budget_idle_pace_seconds',
    help: "Interval between idle polls (all tasks together) that makes the month's budget last to its end.",
    registers,
    collect() {
      const s = snapshot();
      if (s) this.set(Number.isFinite(s.idlePaceMs) ? s.idlePaceMs / 1000 : -1);
    },
  });
  const aheadOfPace = new Gauge({
    name: 'dfworker_budget_ahead_of_pace',
    help: '1 while the month is used faster than an even spend plus the run-ahead allowance (re-polls after a hit wait for the idle pace).',
    registers,
    collect() {
      const s = snapshot();
      if (s) this.set(s.aheadOfPace ? 1 : 0);
    },
  });
  const pacingNow = pacing ?? (() => undefined);
  const idleInterval = new Gauge({
    name: 'dfworker_poll_idle_interval_seconds',
    help: 'Interval between polls of a task that find nothing, as planned for the current hour (learnt arrivals, the month left).',
    labelNames: ['task'],
    registers,
    collect() {
      const p = pacingNow();
      if (!p) return;
      this.reset();
      for (const t of p.tasks) {
        this.set({ task: t.key }, Number.isFinite(t.idleIntervalMs) ? t.idleIntervalMs / 1000 : -1);
      }
    },
  });
  const overloaded = new Gauge({
    name: 'dfworker_work_overloaded',
    help: 'Set to 1 while the steady work is more than the month can carry: each poll then claims one execution, and no re-poll follows a hit.',
    registers,
    collect() {
      const p = pacingNow();
      if (p) this.set(p.overloaded ? 1 : 0);
    },
  });
  const pausedSeconds = new Gauge({
    name: 'dfworker_budget_paused_seconds',
    help: 'Seconds left of a pause of all requests after a 429 (0 when not paused).',
    registers,
    collect() {
      const s = snapshot();
      if (s) this.set(s.pausedForMs / 1000);
    },
  });
  return {
    budgetUsed,
    budgetLimit,
    budgetRemaining,
    budgetMonthEnd,
    idlePace,
    aheadOfPace,
    idleInterval,
    overloaded,
    pausedSeconds,
  };
}
