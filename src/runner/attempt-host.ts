// Where a handler attempt runs. The runner decides deadlines, retries and outcomes; a host only runs one
// call of the handler and says how it ended. The inline host calls it on the daemon's own event loop; the
// sandbox's pool (src/sandbox) runs it in a worker thread or a child process.
import type { Logger } from 'pino';
import type { ServiceClient } from '../api/client.ts';
import type { JobContext, JsonObject, TaskExecution } from '../api/types.ts';
import type { TaskContext, TaskModule, TaskSummary } from '../handlers/define-task.ts';
import {
  attemptRefusal,
  createTaskService,
  performServiceCall,
  unavailableTaskService,
  type TaskServiceClient,
} from '../handlers/task-service.ts';
import type { TraceSlot } from '../events/hooks.ts';
import { noopSpan } from '../tracing/noop-span.ts';
import { runInAttemptScope } from './attempt-scope.ts';
import { withTmpDir } from './attempt-tmp-dir.ts';
import { summariseError } from './errors.ts';
import { checkOutput } from './output.ts';

export interface AttemptSpec {
  /** The handler; `file` is where an isolated host imports it from. */
  handler: TaskModule & { readonly file?: string };
  task: TaskSummary;
  execution: TaskExecution;
  /** This attempt's own copy of the input (without the service's `context`). */
  input: JsonObject;
  job: JobContext;
  /** 1-based. */
  attempt: number;
  /** Bound to taskKey, executionId and attempt. */
  logger: Logger;
  timeoutMs: number;
  /** Where `ctx.tmpDir` is made on first read (attempt-tmp-dir.ts); the runner removes it after the attempt. */
  tmpDir: string;
  /** Cleans secrets out of what the handler produced, for anything the host logs itself. */
  redact: (text: string) => string;
  /** The client behind `ctx.service` (its requests in the budget's 'handler' class); none: calls are refused. */
  service?: ServiceClient | undefined;
  /** The attempt's span as a trace listener gave it (empty with tracing off): `ctx.span`, or its context. */
  trace?: TraceSlot | undefined;
}

export type HostResult =
  /** The handler returned `value` (not yet checked against outputKeys). */
  | { kind: 'returned'; value: unknown }
  /** The handler returned something that cannot be reported; checked on the host's side. */
  | { kind: 'unusable'; message: string; missingOutputKeys?: string[] }
  | { kind: 'threw'; error: unknown }
  /** `signal` aborted the attempt; the host has made sure the handler does nothing more it can stop. */
  | { kind: 'stopped' }
  /** What ran the handler died with it (process.exit, out of memory...): `message` says how. */
  | { kind: 'crashed'; message: string };

export interface AttemptHost {
  /** Runs one attempt. Never rejects. Resolves `stopped` once `signal` aborted it (deadline, shutdown). */
  run(spec: AttemptSpec, signal: AbortSignal): Promise<HostResult>;
}

/**
 * Calls the handler on the daemon's own event loop: no cost, no protection (DF_HANDLER_ISOLATION=none, and
 * handlers given as objects rather than files). A handler that ignores `ctx.signal` keeps running after the
 * attempt is given up, and one that blocks the CPU blocks the daemon.
 */
export const inlineHost: AttemptHost = {
  async run(spec, signal) {
    let onAbort: (() => void) | undefined;
    const stopped = new Promise<HostResult>((resolve) => {
      onAbort = () => resolve({ kind: 'stopped' });
      if (signal.aborted) onAbort();
      else signal.addEventListener('abort', onAbort, { once: true });
    });
    let ended = false;
    const ctx: TaskContext = withTmpDir(
      {
        execution: spec.execution,
        task: spec.task,
        attempt: spec.attempt,
        job: spec.job,
        logger: spec.logger,
        signal,
        service: inlineService(spec, signal, () => ended),
        span: spec.trace?.span ?? noopSpan,
      },
      spec.tmpDir,
      () => ended,
    );
    // Wrapping the call turns a synchronous throw into a rejection like any other. A rejection the handler
    // leaked (never awaited) fails this attempt too: see attempt-scope.ts.
    // One that surfaces after the attempt ended (a timer's throw, a rejection left behind) is logged with
    // the execution it came from: the outcome already taken stands.
    let failLeaked!: (result: HostResult) => void;
    const leaked = new Promise<HostResult>((resolve) => (failLeaked = resolve));
    const onLeak = (error: unknown) => {
      if (!ended) {
        failLeaked({ kind: 'threw', error });
        return;
      }
      spec.logger.error(
        { error: spec.redact(summariseError(error).message) },
        'handler code failed after its attempt ended; the outcome already taken stands',
      );
    };
    const running = runInAttemptScope(
      onLeak,
      () => new Promise<unknown>((resolve) => resolve(spec.handler.handle(spec.input, ctx))),
    ).then(
      (value): HostResult => ({ kind: 'returned', value }),
      (error: unknown): HostResult => ({ kind: 'threw', error }),
    );
    try {
      return await Promise.race([running, stopped, leaked]);
    } finally {
      ended = true;
      if (onAbort !== undefined) signal.removeEventListener('abort', onAbort);
    }
  },
};

/**
 * `host` with outputs over `maxBytes` as JSON (DF_HANDLER_MAX_OUTPUT_BYTES) turned into an unusable result, for
 * hosts that run handlers on the daemon's own loop (a worker checks its output before it crosses).
 */
export function withOutputLimit(host: AttemptHost, maxBytes: number): AttemptHost {
  return {
    async run(spec, signal) {
      const result = await host.run(spec, signal);
      if (result.kind !== 'returned') return result;
      // The whole check, as a worker makes it: the runner then treats its verdict as it treats a worker's.
      const checked = checkOutput(result.value, spec.task.outputKeys, maxBytes);
      if (checked.ok) return result;
      const { message, missingOutputKeys } = checked;
      return { kind: 'unusable', message, ...(missingOutputKeys ? { missingOutputKeys } : {}) };
    },
  };
}

/** `ctx.service` on the daemon's own event loop: calls go straight to the handlers' client. */
function inlineService(spec: AttemptSpec, signal: AbortSignal, ended: () => boolean): TaskServiceClient {
  const client = spec.service;
  if (client === undefined) return unavailableTaskService;
  return createTaskService(
    (call) => performServiceCall(client, call, signal),
    () => attemptRefusal(spec.execution.id, ended(), signal),
  );
}
