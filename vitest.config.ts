import { defineConfig } from 'vitest/config';

export default defineConfig({
  // Vitest resolves as server-side code: the source condition must be set for SSR too.
  resolve: { conditions: ['df-worker-source'] },
  ssr: { resolve: { conditions: ['df-worker-source'] } },
  test: {
    include: ['test/**/*.test.ts', 'handlers/**/*.test.{ts,mts,js,mjs}'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Tests start real servers and child processes; two cores are shared between forks.
    pool: 'forks',
    // Under CI a JSON report lets .ci/run print the closing 'N passed, N failed' line.
    reporters: process.env.CI ? ['default', ['json', { outputFile: '.ci/test-report.json' }]] : ['default'],
  },
});
