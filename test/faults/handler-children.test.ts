// Issue 36, item 5: the processes a handler started end with its attempt. A handler spawns a child (attached)
// and a detached one (its own session), then outlives its 3 s timeout: after the FAILED report neither writes a
// line, and neither is alive, in process and in thread isolation.
import { describe, expect, it } from 'vitest';
import { handlerChildrenOutliveTimeout, type ChildIsolation } from './handler-children-scenarios.ts';

describe.runIf(process.platform === 'linux')('a handler whose children outlive its timeout', () => {
  it.each<ChildIsolation>(['process', 'thread'])(
    'no line from its children after FAILED is reported, none alive after (%s isolation)',
    async (isolation) => {
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
});
