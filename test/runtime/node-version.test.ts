// The version guard every entry point runs first (the packed bin and import on an old Node: test/cli/package.test.ts).
import { describe, expect, it } from 'vitest';
import { nodeVersionProblem, REQUIRED_NODE } from '../../src/runtime/node-version.ts';

describe('nodeVersionProblem', () => {
  it.each(['22.19.0', '22.20.1', '24.0.0', '26.1.0'])('accepts Node %s', (version) => {
    expect(nodeVersionProblem(version)).toBeUndefined();
  });

  it.each(['20.20.2', '22.18.9', '18.0.0'])(
    'names the version needed for Node %s, in one line',
    (version) => {
      const problem = nodeVersionProblem(version);
      expect(problem).toContain(`df-worker needs Node.js >= ${REQUIRED_NODE.major}.${REQUIRED_NODE.minor}`);
      expect(problem).toContain(`this is Node.js ${version}`);
      expect(problem).not.toContain('\n');
    },
  );

  it('agrees with package.json "engines"', async () => {
    const { default: pkg } = await import('../../package.json', { with: { type: 'json' } });
    expect(pkg.engines.node).toBe(`>=${REQUIRED_NODE.major}.${REQUIRED_NODE.minor}`);
  });
});
