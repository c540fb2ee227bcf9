// heldUpMs(), the figure behind "healthy work held up beyond normal" in issue 9's handler-fault rows: what it
// counts as the healthy task's wait, on the emulator's records of a span of healthy work.
import { describe, expect, it } from 'vitest';
import { heldUpMs } from './handler-rig.ts';

const T0 = Date.UTC(2026, 11, 2, 4);
const POLL_MS = 500;

/** An execution as the emulator records it: created and (maybe) claimed `ms` after T0. */
function execution(n: number, createdMs: number, claimedMs?: number) {
  return {
    id: `execution-${n}`,
    createdAt: new Date(T0 + createdMs).toISOString(),
    ...(claimedMs === undefined ? {} : { claimedAt: new Date(T0 + claimedMs).toISOString() }),
  };
}

describe('healthy work held up beyond normal (heldUpMs)', () => {
  it('counts what an execution waited beyond one poll interval from when it was due', () => {
    const executions = [execution(1, 0, 200), execution(2, 250, 1_950)];
    const span = { ids: ['execution-1', 'execution-2'], until: T0 + 5_000 };
    // Due at its creation (the first was claimed before it): 1,700 ms, 1,200 beyond the interval.
    expect(heldUpMs(executions, span, POLL_MS)).toBe(1_200);
  });

  it('measures a backlog from the claim before each execution: the service hands out one per poll, oldest first', () => {
    const executions = [execution(1, 0, 900), execution(2, 0, 1_300), execution(3, 0, 1_700)];
    const span = { ids: executions.map((e) => e.id), until: T0 + 5_000 };
    expect(heldUpMs(executions, span, POLL_MS)).toBe(400);
  });

  it('counts an execution still unclaimed when the span ended as claimed then', () => {
    const executions = [execution(1, 0, 100), execution(2, 1_000)];
    const span = { ids: ['execution-1', 'execution-2'], until: T0 + 3_000 };
    expect(heldUpMs(executions, span, POLL_MS)).toBe(1_500);
  });

  // A scenario that stops its daemon and starts another (the key in DF_API_KEY, then in DF_API_KEY_FILE) ends
  // the span when it stops the first: an execution created just before is claimed by the second daemon, after
  // the first drained and the second started, seconds later on a loaded machine. That wait is process start-up,
  // not the pickup of the daemon under test: it once read 2,058 ms against the 2,000 ms bound.
  it('ends its count at the end of the span, whenever the execution was claimed after it', () => {
    const executions = [execution(1, 0, 100), execution(2, 1_500, 4_800)];
    const span = { ids: ['execution-1', 'execution-2'], until: T0 + 1_800 };
    expect(heldUpMs(executions, span, POLL_MS)).toBe(0);
    expect(heldUpMs(executions, { ...span, until: T0 + 2_600 }, POLL_MS)).toBe(600);
  });

  it('leaves out executions of other spans and tasks', () => {
    const executions = [execution(1, 0, 100), execution(2, 0, 9_000)];
    expect(heldUpMs(executions, { ids: ['execution-1'], until: T0 + 10_000 }, POLL_MS)).toBe(0);
  });
});
