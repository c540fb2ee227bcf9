// One handler worker as the pool sees it, whatever it runs in: a worker thread (its own V8 isolate and heap
// limit, in this process) or a child process (its own process: native code and process-wide state too).
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { raiseOomScore } from './process-memory.ts';
import { PROCESS_TAG_VARIABLE, type ProcessTree } from './process-tree.ts';
import type { FromWorker, ToWorker } from './protocol.ts';

export type Isolation = 'thread' | 'process';

export interface WorkerDeath {
  code: number | null;
  signal: NodeJS.Signals | null;
  outOfMemory: boolean;
  /** What the runtime reported, if anything (a thread's uncaught start-up error, a spawn failure). */
  error?: Error;
}

export interface ChannelOptions {
  isolation: Isolation;
  /** Old-generation heap limit of the worker, in MB (a process's whole memory is the pool's to watch). */
  memoryMb: number;
  /** The worker's whole environment (process.env inside it). */
  env: Record<string, string>;
  /** Put in the worker's environment (PROCESS_TAG_VARIABLE): every process it starts inherits it. */
  tag: string;
  onMessage(message: FromWorker): void;
  /** Called once, when the worker is gone (exited, crashed, terminated). */
  onExit(death: WorkerDeath): void;
}

export interface WorkerChannel {
  /** The worker's process id: the daemon's own for a thread. */
  readonly pid: number | undefined;
  /** The processes the worker started, to be found and ended with it (see process-tree.ts). */
  readonly tree: ProcessTree;
  send(message: ToWorker): void;
  /** While an attempt runs the worker keeps the daemon's process alive; idle, it does not. */
  ref(): void;
  unref(): void;
  /** Stops the worker at once, whatever its handler is doing; resolves once it is gone. */
  terminate(): Promise<void>;
}

/** The worker entry beside this file: TypeScript when running from source, the build's JavaScript otherwise. */
const ENTRY = new URL(
  import.meta.url.endsWith('.ts') ? './handler-worker.ts' : './handler-worker.js',
  import.meta.url,
);

export function openChannel(options: ChannelOptions): WorkerChannel {
  return options.isolation === 'thread' ? threadChannel(options) : processChannel(options);
}

function threadChannel(options: ChannelOptions): WorkerChannel {
  const worker = new Worker(ENTRY, {
    env: { ...options.env, [PROCESS_TAG_VARIABLE]: options.tag },
    execArgv: conditionFlags(process.execArgv),
    resourceLimits: { maxOldGenerationSizeMb: options.memoryMb },
    name: 'df-worker handler',
  });
  let error: NodeJS.ErrnoException | undefined;
  worker.on('message', (message: FromWorker) => options.onMessage(message));
  worker.on('error', (e: NodeJS.ErrnoException) => {
    error = e;
  });
  const exited = new Promise<void>((resolve) =>
    worker.once('exit', (code) => {
      const outOfMemory = error?.code === 'ERR_WORKER_OUT_OF_MEMORY';
      options.onExit({ code, signal: null, outOfMemory, ...(error ? { error } : {}) });
      resolve();
    }),
  );
  return {
    pid: process.pid,
    // A thread's children are the daemon's: only their tag tells them apart.
    tree: { tag: options.tag },
    send: (message) => worker.postMessage(message),
    ref: () => worker.ref(),
    unref: () => worker.unref(),
    terminate: async () => {
      // An idle worker is unref'd: its exit must still be awaited, so it holds the loop until then.
      worker.ref();
      await worker.terminate();
      await exited;
    },
  };
}

function processChannel(options: ChannelOptions): WorkerChannel {
  const child = fork(fileURLToPath(ENTRY), [], {
    env: { ...options.env, [PROCESS_TAG_VARIABLE]: options.tag },
    // Its own process group (and session): the processes it starts are ended with it, as a group.
    detached: true,
    execArgv: [...conditionFlags(process.execArgv), `--max-old-space-size=${options.memoryMb}`],
    serialization: 'advanced',
    stdio: ['ignore', 'inherit', 'pipe', 'ipc'],
  });
  // Before its first line of JavaScript runs: at the container's memory limit, the kernel ends it, not the daemon.
  raiseOomScore(child.pid);
  // V8 prints its out-of-memory report on stderr before it aborts; keep the tail to recognise it.
  let stderrTail = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderrTail = (stderrTail + chunk.toString('utf8')).slice(-4096);
    process.stderr.write(chunk);
  });
  let error: Error | undefined;
  // IPC messages that reach the child before its entry listens are dropped: hold them until it says so.
  let waiting: ToWorker[] | undefined = [];
  child.on('message', (message: FromWorker) => {
    if (message.type !== 'ready') {
      options.onMessage(message);
      return;
    }
    const held = waiting ?? [];
    waiting = undefined;
    for (const m of held) if (child.connected) child.send(m);
    options.onMessage(message);
  });
  child.on('error', (e) => (error = e));
  const exited = new Promise<void>((resolve) =>
    child.once('exit', (code, signal) => {
      const outOfMemory = /heap out of memory|Reached heap limit/i.test(stderrTail);
      options.onExit({ code, signal, outOfMemory, ...(error ? { error } : {}) });
      resolve();
    }),
  );
  return {
    pid: child.pid,
    tree: { tag: options.tag, leader: child.pid },
    send: (message) => {
      if (waiting) waiting.push(message);
      else if (child.connected) child.send(message);
    },
    ref: () => {
      child.ref();
      child.channel?.ref();
    },
    unref: () => {
      child.unref();
      child.channel?.unref();
    },
    terminate: async () => {
      // An idle child is unref'd: its exit must still be awaited, so it holds the loop until then.
      child.ref();
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}

/** The `--conditions` flags of this process (how `df-worker` resolves), and nothing else of its flags. */
export function conditionFlags(execArgv: readonly string[]): string[] {
  const flags: string[] = [];
  for (let i = 0; i < execArgv.length; i++) {
    const arg = execArgv[i]!;
    if (arg.startsWith('--conditions=') || arg.startsWith('-C=')) flags.push(arg);
    else if ((arg === '--conditions' || arg === '-C') && execArgv[i + 1] !== undefined) {
      flags.push(arg, execArgv[++i]!);
    }
  }
  return flags;
}
