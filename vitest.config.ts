import { defineConfig } from 'vitest/config';

export default defineConfig({
  resolve: { conditions: ['df-worker-source'] },
  test: {
    include: ['test/**/*.test.ts', 'handlers/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Tests start real servers and child processes; two cores are shared between forks.
    pool: 'forks',
  },
});
