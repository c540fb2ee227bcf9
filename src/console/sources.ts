// What the console shows, from where: the service side (the emulator: tasks, executions with their claims and
// reports, variables, files, the keys' use of the limits) and, when a worker runs in the same process, the
// worker side (attempts and their log lines, its budget, its dead letters).
import type { Task, Variable } from '../api/types.ts';
import type { BudgetSnapshot } from '../budget/budget.ts';
import type { DeadLetterRetry } from '../standalone/dead-letters.ts';
import type { KeyUsageFigures } from '../emulator/limits.ts';
import type { EmulatedFile } from '../emulator/file-store.ts';
import type { EmulatedExecution } from '../emulator/types.ts';
import type { DeadLetter } from '../journal/journal.ts';
import type { UsageSamples } from './budget-chart.ts';
import type { ExecutionRecorder } from './execution-record.ts';

export interface ServiceSide {
  tasks(): Task[];
  executions(): EmulatedExecution[];
  variables(): (Variable & { etag: string })[];
  files(): EmulatedFile[];
  usage(): KeyUsageFigures[];
}

export interface WorkerSide {
  recorder: ExecutionRecorder;
  /** The key's budget as the worker spends it; undefined until the worker opened it. */
  budget(): BudgetSnapshot | undefined;
  deadLetters(): Promise<DeadLetter[]>;
  /** Absent on a read-only page. */
  retryDeadLetter?(executionId: string): Promise<DeadLetterRetry>;
  discardDeadLetter?(executionId: string): Promise<boolean>;
}

export interface ConsoleSources {
  service?: ServiceSide;
  worker?: WorkerSide;
  /** Samples of the month's usage, for the pace chart. */
  samples: UsageSamples;
}
