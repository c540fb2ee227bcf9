import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { renderReadme } from '../../src/docs/reference.ts';

describe('README.md', () => {
  it('holds the configuration and metrics tables generated from the code (run `npm run docs` to update)', async () => {
    const readme = await readFile(new URL('../../README.md', import.meta.url), 'utf8');
    expect(readme).toBe(renderReadme(readme));
  });

  it('shows the newcomer commands, and .ci/run runs the same test command', async () => {
    const readme = await readFile(new URL('../../README.md', import.meta.url), 'utf8');
    const ci = await readFile(new URL('../../.ci/run', import.meta.url), 'utf8');
    expect(readme).toContain('npm run demo -- --executions 9');
    expect(readme).toContain('\nnpm test\n');
    expect(ci.split('\n')).toContain('npm test');
  });
});
