// Why a handler worker went away because of its handler: out of memory (its heap limit, the memory watch, or the
// container's limit reached and the kernel's OOM killer), process.exit, or a crash; and the message that tells
// the user what happened to the attempt and which setting to change.
import type { Redact } from '../secrets/redact.ts';
import type { PoolWorker, WorkerGoneReason } from './pool-worker.ts';
import { oomKillCount } from './process-memory.ts';
import type { Isolation, WorkerDeath } from './worker-channel.ts';

export function goneReason(worker: PoolWorker, death: WorkerDeath): WorkerGoneReason {
  if (death.outOfMemory || killedByKernel(worker, death)) return 'out-of-memory';
  return worker.exitCode !== undefined ? 'exit' : 'crash';
}

/** Died of SIGKILL that the pool did not send, while the cgroup counted an OOM kill: the container's limit. */
function killedByKernel(worker: PoolWorker, death: WorkerDeath): boolean {
  if (death.signal !== 'SIGKILL' || worker.oomKillsAtStart === undefined) return false;
  return (oomKillCount() ?? 0) > worker.oomKillsAtStart;
}

export function describeDeath(
  worker: PoolWorker,
  death: WorkerDeath,
  pool: { isolation: Isolation; memoryMb: number; redact: Redact },
): string {
  const what = pool.isolation === 'thread' ? 'worker thread' : 'worker process';
  if (killedByKernel(worker, death)) {
    return (
      "handler ran out of memory: the kernel's out-of-memory killer ended its worker process (the container's " +
      `memory limit was reached; each worker may hold DF_HANDLER_MEMORY_MB=${pool.memoryMb} MB more than ` +
      'Node.js itself, DF_CONCURRENCY of them at once) and it was replaced'
    );
  }
  if (death.outOfMemory) {
    return (
      `handler ran out of memory: its ${what} reached the ${pool.memoryMb} MB heap limit ` +
      '(DF_HANDLER_MEMORY_MB) and was replaced'
    );
  }
  if (worker.exitCode !== undefined) {
    return `handler called process.exit(${worker.exitCode}); its ${what} was replaced`;
  }
  if (death.error) return `handler ${what} crashed: ${pool.redact(death.error.message)}`;
  if (death.signal) return `handler ${what} was killed by ${death.signal}`;
  return `handler ${what} exited with code ${death.code ?? 'unknown'}`;
}

/** Why the pool's memory watch killed a worker process that added `addedMb` to its start (see killedFor). */
export function describeOverLimit(addedMb: number, memoryMb: number): string {
  return (
    `handler ran out of memory: its worker process held ${Math.round(addedMb)} MB more than when it started ` +
    `(heap and off-heap: Buffers, native memory), over the ${memoryMb} MB limit ` +
    '(DF_HANDLER_MEMORY_MB), and was killed and replaced'
  );
}
