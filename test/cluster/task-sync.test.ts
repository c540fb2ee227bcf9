// DF_TASK_SYNC in clustered mode: replicas started together create a task missing from the service once.
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { clusterFixture } from './cluster-rig.ts';
import { clusteredTestsRun } from './redis-server.ts';

const HANDLER = `import { defineTask } from 'df-worker';
export default defineTask({
  key: 'delta',
  description: 'created by task sync',
  inputKeys: ['n'],
  outputKeys: ['n'],
  handle: async (input: { n: number }) => ({ n: input.n }),
});
`;

describe.runIf(clusteredTestsRun)('task sync in clustered mode', () => {
  const cluster = clusterFixture();

  it('three replicas started at once create a missing task once', async () => {
    const rig = await cluster.create({ perSecond: 20, perMinute: 1_200, env: { DF_TASK_SYNC: 'true' } });
    await writeFile(path.join(rig.dir, 'handlers', 'delta.ts'), HANDLER);
    // Slow task lists: the replicas' first reads overlap, as they would on a slow service.
    rig.emulator.setFaults([{ operation: 'tasks.list', kind: 'latency', ms: 1_500 }]);
    await Promise.all(['a', 'b', 'c'].map((name) => rig.start(name)));
    expect(rig.emulator.tasks().filter((t) => t.key === 'delta')).toHaveLength(1);
  }, 40_000);
});
