// Issue 36, item 5: the processes a handler started end with its attempt. A handler spawns a child (attached)
// and a detached one (its own session), then outlives its 3 s timeout: after the FAILED report neither writes a
// line, and neither is alive, in process and in thread isolation.
import { describe, it } from 'vitest';
import { handlerChildrenOutliveTimeout, type ChildIsolation } from './handler-children-scenarios.ts';

describe.runIf(process.platform === 'linux')('a handler whose children outlive its timeout', () => {
  // The two rows share nothing (each its own emulator, daemon and folder) and spend their time waiting on the
  // handler's 3 s timeout and the watch after it, not on the CPU: they wait side by side.
  for (const isolation of ['process', 'thread'] satisfies ChildIsolation[]) {
    it.concurrent(
      `no line from its children after FAILED is reported, none alive after (${isolation} isolation)`,
      async ({ expect }) => {
        const result = await handlerChildrenOutliveTimeout(isolation);
        console.log(`handler children: ${result.detail}`);
        expect(result.detail).toContain('report FAILED; children started 2;');
        expect(result.linesAfterReport).toBe(0);
        expect(result.detail).toContain('alive after the report 0');
        expect(result.aliveAfterExit).toBe(0);
        expect(result.figures).toMatchObject({ lost: 0, duplicated: 0 });
        expect(result.completed).toBe(true);
      },
      30_000,
    );
  }
});
