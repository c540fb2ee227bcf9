// The entry of a handler worker: a worker thread or a child process that runs handler attempts one at a
// time, away from the daemon's event loop. It imports each handler module once, hands the handler a ctx whose
// logger and signal cross the boundary, and turns whatever the handler does (returns, throws, leaks a
// rejection, calls process.exit) into a message the daemon can act on.
import { AsyncLocalStorage } from 'node:async_hooks';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { parentPort } from 'node:worker_threads';
import { pino, type Logger } from 'pino';
import { defineTask, isNonRetryableError, isTaskModule, type TaskModule } from '../handlers/define-task.ts';
import {
  attemptRefusal,
  createTaskService,
  serviceCallError,
  type TaskServiceClient,
} from '../handlers/task-service.ts';
import { registerSelfResolution } from '../handlers/self-resolve.ts';
import { saveCompileCache } from './compile-cache.ts';
import { HandlerTimeoutError, summariseError } from '../runner/errors.ts';
import { noopSpan } from '../tracing/noop-span.ts';
import type { WorkerTracing } from '../tracing/worker-tracing.ts';
import { checkOutput } from '../runner/output.ts';
import { withTmpDir } from '../runner/attempt-tmp-dir.ts';
import {
  ATTEMPT_BINDING,
  type AbortMessage,
  type FromWorker,
  type RunMessage,
  type SerializedError,
  type ServiceResultMessage,
  type ToWorker,
  type WorkerOutcome,
} from './protocol.ts';

interface AttemptState {
  attemptId: number;
  executionId: string;
  taskKey: string;
  settled: boolean;
  /** The handler was called: until then its module loads, and an abort ends the attempt at once. */
  started: boolean;
  controller: AbortController;
}

const post = connect((message) => void onMessage(message));
const scope = new AsyncLocalStorage<AttemptState>();
const running = new Map<number, AttemptState>();
const modules = new Map<string, Promise<TaskModule>>();
/** `ctx.service` calls sent to the daemon and not yet answered, by call id. */
const calls = new Map<
  number,
  { attemptId: number; resolve(value: unknown): void; reject(error: Error): void }
>();
let nextCallId = 1;
let lastExecutionId: string | undefined;
/** Loaded by the first attempt that comes with a trace: a worker of a daemon without tracing never loads it. */
let tracing: Promise<WorkerTracing> | undefined;

registerSelfResolution();
const rootLogger = pino(
  { base: undefined, timestamp: false, serializers: { err: pino.stdSerializers.err } },
  { write: (line: string) => post({ type: 'log', line }) },
);

// Handler code calling process.exit takes its worker down, never the daemon; the daemon learns why first.
const exit = process.exit.bind(process);
process.exit = ((code?: number | string | null) => {
  const executionId = scope.getStore()?.executionId ?? lastExecutionId;
  post({ type: 'exit-called', code: Number(code ?? process.exitCode ?? 0), ...optional({ executionId }) });
  exit(code);
}) as typeof process.exit;

process.on('uncaughtException', (error) => stray(error, 'uncaught exception'));
process.on('unhandledRejection', (reason) => stray(reason, 'unhandled rejection'));
post({ type: 'ready' });

async function onMessage(message: ToWorker): Promise<void> {
  if (message.type === 'abort') abort(message);
  else if (message.type === 'service-result') answerCall(message);
  else await run(message);
}

async function run(message: RunMessage): Promise<void> {
  const state: AttemptState = {
    attemptId: message.attemptId,
    executionId: message.execution.id,
    taskKey: message.taskKey,
    settled: false,
    started: false,
    controller: new AbortController(),
  };
  running.set(state.attemptId, state);
  lastExecutionId = state.executionId;
  rootLogger.level = message.logLevel;
  try {
    const handler = await loadHandler(message.file, message.taskKey);
    // Aborted while its module loaded (see abort()): the handler is not started.
    if (state.settled) return;
    state.started = true;
    const logger: Logger = rootLogger.child({ [ATTEMPT_BINDING]: message.attemptId });
    const traced = message.trace === undefined ? undefined : await attemptTrace(message.trace, state);
    const ctx = withTmpDir(
      {
        execution: message.execution,
        task: message.task,
        attempt: message.attempt,
        job: message.job,
        logger,
        signal: state.controller.signal,
        service: serviceFor(state),
        span: traced?.span ?? noopSpan,
      },
      message.tmpDir,
      () => state.settled,
    );
    const call = () =>
      scope.run(state, () => new Promise<unknown>((resolve) => resolve(handler.handle(message.input, ctx))));
    const value = await (traced ? traced.run(call) : call());
    settle(state, returned(value, message));
  } catch (error) {
    settle(state, { kind: 'threw', error: serializeError(error) });
  }
}

/** The attempt's span stand-in (its calls go to the daemon) and the context the handler runs in. */
async function attemptTrace(
  headers: Record<string, string>,
  state: AttemptState,
): Promise<ReturnType<WorkerTracing['attempt']> | undefined> {
  tracing ??= import('../tracing/worker-tracing.ts').then((m) =>
    m.startWorkerTracing((spans) => post({ type: 'spans', spans })),
  );
  try {
    return (await tracing).attempt(headers, (update) =>
      post({ type: 'span-update', attemptId: state.attemptId, update }),
    );
  } catch {
    // Traces are best effort: the handler runs without them rather than fail its attempt.
    return undefined;
  }
}

function returned(value: unknown, message: RunMessage): WorkerOutcome {
  // Checked here, size included, so an output too large never crosses into the daemon's memory.
  const checked = checkOutput(value, message.task.outputKeys, message.maxOutputBytes);
  if (checked.ok) return { kind: 'returned', output: checked.output };
  return {
    kind: 'unusable',
    message: checked.message,
    ...optional({ missingOutputKeys: checked.missingOutputKeys }),
  };
}

/** `ctx.service` of one attempt: each call crosses to the daemon as a message and its answer comes back. */
function serviceFor(state: AttemptState): TaskServiceClient {
  return createTaskService(
    (call) =>
      new Promise<unknown>((resolve, reject) => {
        const callId = nextCallId++;
        calls.set(callId, { attemptId: state.attemptId, resolve, reject });
        post({ type: 'service-call', attemptId: state.attemptId, callId, ...call });
      }),
    () => attemptRefusal(state.executionId, state.settled, state.controller.signal),
  );
}

function answerCall(message: ServiceResultMessage): void {
  const pending = calls.get(message.callId);
  if (!pending) return;
  calls.delete(message.callId);
  if (message.ok) pending.resolve(message.value);
  else pending.reject(serviceCallError(message.error));
}

function settle(state: AttemptState, outcome: WorkerOutcome): void {
  if (state.settled) return;
  state.settled = true;
  running.delete(state.attemptId);
  // Calls the handler left unanswered belong to nobody now: their answers are dropped when they come.
  for (const [callId, pending] of calls) if (pending.attemptId === state.attemptId) calls.delete(callId);
  post({ type: 'result', attemptId: state.attemptId, outcome });
}

function abort(message: AbortMessage): void {
  const state = running.get(message.attemptId);
  if (!state) return;
  const reason =
    message.reason === 'timeout'
      ? new HandlerTimeoutError(state.taskKey, message.timeoutMs)
      : new Error('df-worker is shutting down');
  state.controller.abort(reason);
  // Aborted before its handler was called (its module still loading: a slow first import, a busy machine): the
  // attempt ends now. A handler started later would add its listener after the event and never hear it.
  if (!state.started) settle(state, { kind: 'threw', error: serializeError(reason) });
}

/** A leaked failure fails the attempt it came from while that attempt runs; later, it is only reported. */
function stray(error: unknown, origin: 'uncaught exception' | 'unhandled rejection'): void {
  const state = scope.getStore();
  if (state && !state.settled) {
    settle(state, { kind: 'threw', error: serializeError(error) });
    return;
  }
  const executionId = state?.executionId ?? lastExecutionId;
  post({
    type: 'stray',
    origin,
    afterAttempt: state !== undefined,
    error: serializeError(error),
    ...optional({ executionId }),
  });
}

function loadHandler(file: string, taskKey: string): Promise<TaskModule> {
  let loading = modules.get(file);
  if (!loading) {
    loading = importHandler(file, taskKey);
    modules.set(file, loading);
    // A failed import is tried again by the next attempt (the file may have been fixed meanwhile).
    loading.catch(() => modules.delete(file));
  }
  return loading;
}

async function importHandler(file: string, taskKey: string): Promise<TaskModule> {
  const namespace = (await import(pathToFileURL(path.resolve(file)).href)) as { default?: unknown };
  const exported = namespace.default;
  const task = isTaskModule(exported) ? exported : defineTask(exported as Parameters<typeof defineTask>[0]);
  if (task.key !== taskKey) {
    throw new Error(`${file} now defines task "${task.key}", not "${taskKey}"; restart df-worker`);
  }
  // Idle workers are terminated, never exit: the next one starts from what this one compiled.
  saveCompileCache();
  return task;
}

function serializeError(error: unknown): SerializedError {
  const { message, errorName } = summariseError(error);
  return {
    name: errorName,
    message,
    nonRetryable: isNonRetryableError(error),
    ...optional({ stack: readStack(error) }),
  };
}

function readStack(error: unknown): string | undefined {
  try {
    const stack = (error as { stack?: unknown } | null)?.stack;
    return typeof stack === 'string' ? stack : undefined;
  } catch {
    return undefined;
  }
}

/** The members of `fields` that are defined (exactOptionalPropertyTypes). */
function optional<T extends Record<string, unknown>>(fields: T): Partial<T> {
  return Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/** The message channel: the thread's parent port, or the child process's IPC channel. */
function connect(receive: (message: ToWorker) => void): (message: FromWorker) => void {
  if (parentPort) {
    const port = parentPort;
    port.on('message', receive);
    return (message) => port.postMessage(message);
  }
  const send = process.send?.bind(process);
  if (!send) throw new Error('handler-worker runs only as a worker thread or a forked child process');
  process.on('message', (message) => receive(message as ToWorker));
  // The daemon going away (even kill -9) closes the channel: the worker must not outlive it.
  process.on('disconnect', () => exit(0));
  return (message) => {
    send(message);
  };
}
