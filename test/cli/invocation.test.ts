// The command the CLI's hints print: the one that works where the CLI runs.
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { cliInvocation } from '../../src/cli/invocation.ts';

describe('cliInvocation', () => {
  it('prints the npm script in a clone of the repository', () => {
    expect(cliInvocation('/home/me/df-worker', '/home/me/df-worker')).toBe('npm run cli --');
  });

  it('prints npx in a project that installed the package, from any folder inside it', () => {
    const installed = '/srv/app/node_modules/df-worker';
    expect(cliInvocation(installed, '/srv/app')).toBe('npx df-worker');
    expect(cliInvocation(installed, '/srv/app/handlers')).toBe('npx df-worker');
    expect(
      cliInvocation('/srv/app/node_modules/.pnpm/df-worker@0.1.0/node_modules/df-worker', '/srv/app'),
    ).toBe('npx df-worker');
  });

  it('prints the bare command for a global install used from elsewhere', () => {
    expect(cliInvocation('/usr/lib/node_modules/df-worker', '/home/me/project')).toBe('df-worker');
  });

  it('uses the running copy by default: this repository, from source', () => {
    expect(cliInvocation(undefined, path.resolve('.'))).toBe('npm run cli --');
  });
});
