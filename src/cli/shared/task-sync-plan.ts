// The plan of a task sync: how the service's custom tasks differ from what the handlers declare, entry by entry
// (create, update, unchanged), and its lines for a person. Pure, so `tasks sync --dry-run`, `tasks sync` and
// the dev session's reloads (cli/dev/handler-set.ts) agree on what changes.
import type { KeyDescription, Task, TaskDefinition } from '../../api/types.ts';
import { definitionOf, matchTasks } from '../../daemon/task-registry.ts';
import type { TaskModule } from '../../handlers/define-task.ts';

/** Longest description or field value a plan line shows; a longer one ends in `…`. */
const MAX_SHOWN_DESCRIPTION = 40;

/**
 * How many executions of the task run at once, by both sides, when either sets it: the handler's declared
 * `concurrency` and the service task's `concurrentExecLimit` (how many it hands out at once). Neither is synced.
 */
export interface ConcurrencyPair {
  handler: number | undefined;
  service: number | undefined;
}

/** What sync does for one handler's task. */
export type SyncEntry = (
  | { action: 'create'; key: string; definition: TaskDefinition }
  | {
      action: 'update';
      key: string;
      taskId: string;
      definition: TaskDefinition;
      changes: string[];
      /** The task's fields beyond the definition, `name=value`: sent back unchanged, never compared. */
      kept: string[];
    }
  | { action: 'unchanged'; key: string; taskId: string; kept: string[] }
) & { concurrency?: ConcurrencyPair };

export interface SyncPlan {
  /** One entry per handler, by task key. */
  entries: SyncEntry[];
  /** Keys of service tasks with no handler here: listed, never changed. */
  unmanaged: string[];
}

/** Compares the service's tasks with the handlers' declarations; pure, so dry run and real run agree. */
export function planTaskSync(tasks: Task[], handlers: ReadonlyMap<string, TaskModule>): SyncPlan {
  const match = matchTasks(tasks, handlers);
  const entries: SyncEntry[] = [];
  for (const key of match.missing) {
    const handler = handlers.get(key)!;
    entries.push({
      action: 'create',
      key,
      definition: definitionOf(handler),
      ...concurrencyOf(handler, undefined),
    });
  }
  for (const { task, handler } of match.registered) {
    // Only what the handler declares changes: the PUT carries the task's other fields back as they are.
    const definition: TaskDefinition = {
      ...definitionOf(handler),
      ...(task.extraFields ? { extraFields: task.extraFields } : {}),
    };
    const changes = taskDifferences(task, definition);
    const kept = describeExtraFields(task.extraFields);
    const concurrency = concurrencyOf(handler, task);
    entries.push(
      changes.length === 0
        ? { action: 'unchanged', key: task.key, taskId: task.id, kept, ...concurrency }
        : { action: 'update', key: task.key, taskId: task.id, definition, changes, kept, ...concurrency },
    );
  }
  entries.sort((a, b) => a.key.localeCompare(b.key));
  return { entries, unmanaged: [...match.unhandled].sort() };
}

/** How the service's task differs from the handler's definition, one item per member: `retryCount 0 -> 2`. */
export function taskDifferences(task: TaskDefinition, definition: TaskDefinition): string[] {
  const changes: string[] = [];
  if (task.description !== definition.description) {
    changes.push(`description ${shorten(task.description)} -> ${shorten(definition.description)}`);
  }
  if (task.retryCount !== definition.retryCount) {
    changes.push(`retryCount ${task.retryCount} -> ${definition.retryCount}`);
  }
  for (const member of ['inputKeys', 'outputKeys'] as const) {
    const change = keyDifferences(task[member], definition[member]);
    if (change !== undefined) changes.push(`${member} ${change}`);
  }
  return changes;
}

/** `+added -removed ~redescribed`, `reordered`, or undefined when both lists are the same. */
function keyDifferences(current: KeyDescription[], wanted: KeyDescription[]): string | undefined {
  const currentByKey = new Map(current.map((k) => [k.key, k.description]));
  const wantedKeys = new Set(wanted.map((k) => k.key));
  const parts = [
    ...wanted.filter((k) => !currentByKey.has(k.key)).map((k) => `+${k.key}`),
    ...current.filter((k) => !wantedKeys.has(k.key)).map((k) => `-${k.key}`),
    ...wanted
      .filter((k) => currentByKey.has(k.key) && currentByKey.get(k.key) !== k.description)
      .map((k) => `~${k.key}`),
  ];
  if (parts.length > 0) return parts.join(' ');
  const sameOrder = current.length === wanted.length && current.every((k, i) => k.key === wanted[i]?.key);
  return sameOrder ? undefined : 'reordered';
}

function shorten(text: string): string {
  const shown = text.length > MAX_SHOWN_DESCRIPTION ? `${text.slice(0, MAX_SHOWN_DESCRIPTION - 1)}…` : text;
  return JSON.stringify(shown);
}

/** `name=value` for each field of a task beyond its definition, values shortened as descriptions are. */
export function describeExtraFields(extraFields: Task['extraFields']): string[] {
  return Object.entries(extraFields ?? {}).map(([field, value]) => {
    const text = JSON.stringify(value) ?? 'null';
    const shown = text.length > MAX_SHOWN_DESCRIPTION ? `${text.slice(0, MAX_SHOWN_DESCRIPTION - 1)}…` : text;
    return `${field}=${shown}`;
  });
}

/** `{ concurrency }` when the handler declares one or the task has a concurrentExecLimit; else nothing. */
function concurrencyOf(handler: TaskModule, task: Task | undefined): { concurrency?: ConcurrencyPair } {
  const limit = task?.extraFields?.concurrentExecLimit;
  const service = typeof limit === 'number' && Number.isFinite(limit) && limit > 0 ? limit : undefined;
  if (handler.concurrency === undefined && service === undefined) return {};
  return { concurrency: { handler: handler.concurrency, service } };
}

/**
 * The plan's lines for one entry: `+ create k`, `~ update k: ...`, `= k unchanged`, then the task's fields
 * the sync leaves as they are (`    kept as on the service: timeoutSeconds=300, concurrentExecLimit=2`) and,
 * when either side sets it, how many run at once: `    at once: handler concurrency 4, concurrentExecLimit 2`.
 */
export function describeEntry(entry: SyncEntry): string {
  const lines =
    entry.action === 'create'
      ? [`+ create ${entry.key}`]
      : [
          entry.action === 'update'
            ? `~ update ${entry.key}: ${entry.changes.join(', ')}`
            : `= ${entry.key} unchanged`,
          ...(entry.kept.length === 0 ? [] : [`    kept as on the service: ${entry.kept.join(', ')}`]),
        ];
  if (entry.concurrency) lines.push(`    at once: ${describeConcurrency(entry.concurrency)}`);
  return lines.join('\n');
}

function describeConcurrency({ handler, service }: ConcurrencyPair): string {
  const declared = `handler concurrency ${handler ?? 'not set'}`;
  const limit = `concurrentExecLimit ${service ?? 'not set'}`;
  // The service hands out no more than its limit: the handler's slots above it stay idle (as the daemon warns).
  const idle =
    handler !== undefined && service !== undefined && handler > service ? ' (slots above it stay idle)' : '';
  return `${declared}, ${limit}${idle}`;
}
