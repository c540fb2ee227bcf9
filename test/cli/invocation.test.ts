// The command the CLI's hints print: the one that works where the CLI runs.
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { cliInvocation } from '../../src/cli/invocation.ts';
import { tempDir } from './run-cli.ts';

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

  it("prints npx with the spec npx ran, for a copy in npx's own cache", async () => {
    const cache = await tempDir({
      '_npx/4f2a/package.json': JSON.stringify({
        dependencies: { 'df-worker': 'file:../../work/df-worker-0.1.0.tgz' },
      }),
      '_npx/77b1/package.json': JSON.stringify({
        dependencies: { 'df-worker': 'github:df-worker/df-worker' },
      }),
      '_npx/9c03/package.json': JSON.stringify({ dependencies: { 'df-worker': '^0.1.0' } }),
    });
    const installed = (hash: string) => path.join(cache, '_npx', hash, 'node_modules', 'df-worker');
    const tarball = path.join(cache, 'work', 'df-worker-0.1.0.tgz');
    expect(cliInvocation(installed('4f2a'), '/home/me/project')).toBe(`npx ${tarball}`);
    expect(cliInvocation(installed('77b1'), '/home/me/project')).toBe('npx github:df-worker/df-worker');
    expect(cliInvocation(installed('9c03'), '/home/me/project')).toBe('npx df-worker');
  });

  it('prints the bare command for a global install used from elsewhere', () => {
    expect(cliInvocation('/usr/lib/node_modules/df-worker', '/home/me/project')).toBe('df-worker');
  });

  it('uses the running copy by default: this repository, from source', () => {
    expect(cliInvocation(undefined, path.resolve('.'))).toBe('npm run cli --');
  });
});
