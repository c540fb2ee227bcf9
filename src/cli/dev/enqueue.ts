// `df-worker dev --enqueue TASK [INPUT]`: enqueues one execution into the running dev session through its
// emulator's admin route (which wakes the session's worker), then waits for its report and prints it with the
// time it took to be picked up.
import type { JsonObject } from '../../api/types.ts';
import type { EmulatedExecution } from '../../emulator/index.ts';
import type { DevSession } from './session-file.ts';
import { cliCommand } from '../invocation.ts';

export interface EnqueueOptions {
  session: DevSession;
  taskKey: string;
  input: JsonObject;
  /** How long to wait for the report, in ms; 0 returns once the execution is queued. */
  waitMs: number;
  /** Interval between two looks at the execution while waiting, in ms. Default 20. */
  pollMs?: number;
  say: (line: string) => void;
}

export type EnqueueResult =
  | { kind: 'queued'; execution: EmulatedExecution }
  | { kind: 'reported'; execution: EmulatedExecution; pickupMs: number; reportedMs: number }
  | { kind: 'waiting'; execution: EmulatedExecution }
  | { kind: 'refused'; message: string };

export async function enqueueIntoSession(options: EnqueueOptions): Promise<EnqueueResult> {
  const { session, taskKey, say } = options;
  const admin = adminClient(session);
  const answer = await admin('POST', '/__admin/executions', { taskKey, input: options.input });
  if (answer.status === 404) {
    const tasks = await admin('GET', '/__admin/tasks');
    const keys = ((tasks.body as { data?: { key: string }[] }).data ?? []).map((t) => t.key);
    return {
      kind: 'refused',
      message: `the dev session has no task "${taskKey}"; its tasks: ${keys.join(', ') || 'none'}`,
    };
  }
  if (answer.status !== 201) {
    return {
      kind: 'refused',
      message: `the emulator answered ${answer.status}: ${JSON.stringify(answer.body)}`,
    };
  }
  const queued = answer.body as EmulatedExecution;
  say(`→ ${queued.id} queued for ${taskKey}`);
  if (options.waitMs <= 0) return { kind: 'queued', execution: queued };

  const deadline = performance.now() + options.waitMs;
  for (;;) {
    const { body } = await admin('GET', `/__admin/executions/${encodeURIComponent(queued.id)}`);
    const execution = body as EmulatedExecution;
    const report = execution.reports?.[0];
    if (report) {
      const created = Date.parse(execution.createdAt);
      return {
        kind: 'reported',
        execution,
        pickupMs: execution.claimedAt ? Date.parse(execution.claimedAt) - created : NaN,
        reportedMs: Date.parse(report.at) - created,
      };
    }
    if (performance.now() >= deadline) return { kind: 'waiting', execution };
    await new Promise((resolve) => setTimeout(resolve, options.pollMs ?? 20));
  }
}

type AdminCall = (
  method: string,
  route: string,
  body?: unknown,
) => Promise<{ status: number; body: unknown }>;

function adminClient(session: DevSession): AdminCall {
  return async (method, route, body) => {
    let response: Response;
    try {
      response = await fetch(`${session.url}${route}`, {
        method,
        headers: {
          authorization: `Bearer ${session.adminToken}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        signal: AbortSignal.timeout(10_000),
      });
    } catch (error) {
      throw new Error(
        `the dev session's emulator at ${session.url} does not answer (${(error as Error).message}); ` +
          `is \`${cliCommand('dev')}\` still running?`,
        { cause: error },
      );
    }
    const text = await response.text();
    let parsed: unknown = text;
    try {
      parsed = text === '' ? undefined : JSON.parse(text);
    } catch {
      // kept as text
    }
    return { status: response.status, body: parsed };
  };
}
