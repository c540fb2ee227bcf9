import { configDefaults, defineConfig } from 'vitest/config';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * The files that take longest, longest first: a real minute of the key's 50-a-minute window, daemons for half
 * of one, a package build. Vitest starts the files it has timed before longest first, but a fresh clone (CI)
 * has no timings and would start the smallest files last, whatever they wait for: these go first, so that no
 * fork ends the run alone on one of them.
 */
const LONGEST_FILES = [
  'test/faults/lost-budget-file.test.ts',
  'test/faults/restart-windows.test.ts',
  'test/cli/package.test.ts',
  'test/cli/package-clone.test.ts',
  'test/faults/network.test.ts',
  'test/faults/handler-faults.test.ts',
  'test/daemon/throughput.test.ts',
  'test/cluster/cluster-daemons.test.ts',
  'test/faults/handler-memory.test.ts',
  'test/scheduler/month-replay-learnt.test.ts',
  'test/scheduler/month-replay-stationary.test.ts',
  'test/sandbox/handler-pool.test.ts',
];

class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const rank = (spec: TestSpecification) => {
      const index = LONGEST_FILES.findIndex((file) => spec.moduleId.endsWith(`/${file}`));
      return index === -1 ? LONGEST_FILES.length : index;
    };
    // Array.prototype.sort is stable: the rest keep vitest's order (failed first, then longest first).
    return (await super.sort(files)).sort((a, b) => rank(a) - rank(b));
  }
}

/**
 * Files that measure how the daemon holds up under a load they make themselves (a flood of its HTTP port):
 * beside other forks their figures measure the machine, not the daemon. They run alone, after the rest.
 */
const RUN_ALONE = ['test/faults/metrics-flood.test.ts'];

export default defineConfig({
  // Vitest resolves as server-side code: the source condition must be set for SSR too.
  resolve: { conditions: ['df-worker-source'] },
  ssr: { resolve: { conditions: ['df-worker-source'] } },
  test: {
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Tests start real servers and child processes: each file in its own process.
    pool: 'forks',
    sequence: { sequencer: LongestFirst },
    projects: [
      {
        extends: true,
        test: {
          name: 'parallel',
          include: ['test/**/*.test.ts', 'handlers/**/*.test.{ts,mts,js,mjs}'],
          exclude: [...configDefaults.exclude, ...RUN_ALONE],
          // Most of the suite's time is spent waiting on the key's windows (5/s, 50/min) with real daemons, not
          // on the CPU: more forks than cores overlap those waits. On two cores vitest's default is one fork. Five,
          // not four: 195 files took 392 s with four forks and 330 s with five, on the idle 2-core machine.
          maxWorkers: 5,
        },
      },
      {
        extends: true,
        test: { name: 'alone', include: RUN_ALONE, maxWorkers: 1, sequence: { groupOrder: 1 } },
      },
    ],
    // Under CI a JSON report lets .ci/run print the closing 'N passed, N failed' line.
    reporters: process.env.CI ? ['default', ['json', { outputFile: '.ci/test-report.json' }]] : ['default'],
  },
});
