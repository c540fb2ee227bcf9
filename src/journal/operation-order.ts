// The order of the journal's file operations: one execution's run one after another (a report's record never
// overtakes its claim's), alongside other executions', while a scan of the whole folder runs alone.
import { ReadWriteGate } from './read-write-gate.ts';

export class OperationOrder {
  readonly #gate = new ReadWriteGate();
  /** Per execution, the tail of its operations: each runs after the previous one settled. */
  readonly #queues = new Map<string, Promise<void>>();

  /** Runs the execution's `operation` after its earlier ones settled, alongside other executions'. */
  ofExecution(executionId: string, operation: () => Promise<void>): Promise<void> {
    const previous = this.#queues.get(executionId) ?? Promise.resolve();
    const run = previous.then(() => this.#gate.shared(operation));
    const tail = run.catch(() => undefined);
    this.#queues.set(executionId, tail);
    void tail.then(() => {
      if (this.#queues.get(executionId) === tail) this.#queues.delete(executionId);
    });
    return run;
  }

  /** Runs `scan` alone: once every operation in flight ended, and before any that comes after it. */
  alone<T>(scan: () => Promise<T>): Promise<T> {
    return this.#gate.exclusive(scan);
  }
}
